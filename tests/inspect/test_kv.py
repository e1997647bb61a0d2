"""llmpdb.inspect.kv / kv_layers on real caches of real generate() runs on tiny random models."""

from __future__ import annotations

import pytest
import torch
import transformers as T
from tiny_models import plain_model, tiny_gpt2, tiny_llama, tiny_mistral_sliding, tiny_t5

from llmpdb.inspect.kv import (
    NotACacheError,
    find_cache,
    head_sharing,
    history_entry,
    inspect_cache,
    looks_like_cache,
    unwrap_cache,
)
from llmpdb.inspect.kv_layers import inspect_layer, tuple_layer

PROMPT = 7


def capture(model, steps: int = 3, **generate_kwargs):
    """Reports of the cache as each forward of generate() receives it (prefill first: nothing filled yet)."""
    reports = []

    def hook(module, args, kwargs):
        cache = kwargs.get("cache", kwargs.get("past_key_values"))
        reports.append(inspect_cache(cache, config=module.config) if cache is not None else None)

    handle = model.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        torch.manual_seed(1)
        model.generate(torch.randint(3, 200, (1, PROMPT)), max_new_tokens=steps, do_sample=False, **generate_kwargs)
    finally:
        handle.remove()
    return reports


def test_llama_gqa_two_consecutive_decoding_steps():
    reports = capture(tiny_llama())
    assert len(reports) == 3
    prefill, step1, step2 = reports
    assert prefill.seq is None and all(not layer.initialized for layer in prefill.layers)
    for report, seq in ((step1, 7), (step2, 8)):
        assert report.class_name == "DynamicCache" and report.layout == "layers"
        assert len(report.layers) == 2
        assert [layer.keys.shape for layer in report.layers] == [(1, 2, seq, 16)] * 2
        assert [layer.values.shape for layer in report.layers] == [(1, 2, seq, 16)] * 2
        assert [(layer.kind, layer.filled, layer.capacity) for layer in report.layers] == [("full", seq, None)] * 2
        assert (report.seq, report.kv_heads, report.q_heads, report.head_dim) == (seq, 2, 4, 16)
        assert head_sharing(report.q_heads, report.kv_heads) == "GQA ×2"
        assert report.nbytes == report.formula_bytes == 2 * 2 * 2 * 16 * seq * 4
        assert report.differences == () and (report.dtype, report.device) == ("f32", "cpu")
    assert step1.formula == "2 × 2 layers × 2 kv heads × 16 head_dim × 7 seq × 4 B"


def test_gpt2_multi_head():
    _, step1, step2 = capture(tiny_gpt2())
    assert [layer.keys.shape for layer in step2.layers] == [(1, 4, 8, 8)] * 2
    assert (step1.seq, step2.seq, step2.kv_heads, step2.q_heads) == (7, 8, 4, 4)
    assert head_sharing(4, 4) == "MHA" and head_sharing(8, 1) == "MQA" and head_sharing(None, 2) == ""
    assert step2.nbytes == step2.formula_bytes == 2 * 2 * 4 * 8 * 8 * 4


def test_static_cache_fill_is_not_capacity():
    _, step1, step2 = capture(tiny_llama(), cache_implementation="static")
    for report, seq in ((step1, 7), (step2, 8)):
        assert report.class_name == "StaticCache"
        assert [layer.keys.shape for layer in report.layers] == [(1, 2, 9, 16)] * 2  # capacity, not fill
        assert [(layer.kind, layer.filled, layer.capacity) for layer in report.layers] == [("static", seq, 9)] * 2
        assert (report.seq, report.capacity) == (seq, 9)
        assert report.nbytes == 2 * 2 * 2 * 16 * 9 * 4 and report.formula_bytes == 2 * 2 * 2 * 16 * seq * 4
        assert report.differences == (f"static capacity 9 allocated for seq {seq}",)


def test_static_layer_before_first_update_shows_capacity():
    cache = T.StaticCache(config=tiny_llama().config, max_cache_len=12)
    report = inspect_cache(cache)
    assert [(layer.kind, layer.initialized, layer.capacity, layer.filled) for layer in report.layers] == [
        ("static", False, 12, None)] * 2
    assert report.seq is None and report.nbytes == 0


def test_sliding_window_length_is_capped():
    _, step1, step2 = capture(tiny_mistral_sliding())
    for report, seq in ((step1, 7), (step2, 8)):
        assert [layer.kind for layer in report.layers] == ["sliding", "sliding"]
        assert [layer.keys.shape for layer in report.layers] == [(1, 2, 3, 16)] * 2  # window 4 keeps 3
        assert [(layer.filled, layer.seen, layer.window) for layer in report.layers] == [(3, seq, 4)] * 2
        assert report.seq == seq and report.nbytes == 2 * 2 * 2 * 16 * 3 * 4
    assert step2.differences == ("sliding window 4 keeps 3 of 8 tokens (layers 0-1)",)


def test_hybrid_sliding_and_full_layers():
    torch.manual_seed(0)
    config = T.Gemma2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=4)
    _, step1, step2 = capture(T.Gemma2ForCausalLM(config).eval())
    assert [(l.kind, l.filled, l.seen, l.window) for l in step2.layers] == [("sliding", 3, 8, 4), ("full", 8, 8, None)]
    assert step1.seq == 7 and step2.seq == 8


def test_encoder_decoder_cache_has_self_and_cross_parts():
    _, step1, step2 = capture(tiny_t5())
    for report, seq in ((step1, 1), (step2, 2)):
        assert report.class_name == "EncoderDecoderCache" and report.parts == ("self", "cross")
        assert [l.keys.shape for l in report.part_layers("self")] == [(1, 4, seq, 8)] * 2
        assert [l.keys.shape for l in report.part_layers("cross")] == [(1, 4, 7, 8)] * 2  # encoder length
        assert report.seq == seq and report.kv_heads == 4 and report.q_heads == 4
        assert report.nbytes == 2 * 2 * 4 * 8 * (seq + 7) * 4
    assert step2.layer(1, "cross").filled == 7
    assert step2.differences == ("cross-attention part adds 3.5 KiB (encoder length 7)",)


def test_quantized_fp8_cache_keeps_a_residual_in_keys():
    model = tiny_llama()
    cache = T.QuantizedCache("fp8", model.config)
    reports = capture(model, cache=cache)
    layer = reports[-1].layers[0]
    assert (layer.kind, layer.filled, layer.seen, layer.quantized) == ("quantized", 0, 8, 8)
    assert layer.keys.shape == (0,) and layer.kv_heads == 2 and layer.head_dim == 16
    assert [m.name for m in layer.extras] == ["_quantized_keys[0]", "_quantized_keys[1]",
                                               "_quantized_values[0]", "_quantized_values[1]"]
    report = reports[-1]
    assert report.dtype == "f32 (stored f8e4m3)" and report.nbytes == 2 * 2 * (2 * 8 * 16 * 1)
    assert report.differences == ("layers 0-1 quantized (8 tokens stored as f8e4m3, residual 0 in f32)",)


def test_linear_attention_states_in_a_hybrid_model():
    torch.manual_seed(0)
    config = T.Lfm2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, layer_types=["conv", "full_attention"])
    reports = capture(T.Lfm2ForCausalLM(config).eval())
    conv, full = reports[-1].layers
    assert conv.kind == "linear" and conv.keys is None
    assert [(m.name, m.shape) for m in conv.states] == [("conv_states[0]", (1, 64, 3))]
    assert (full.kind, full.filled) == ("full", 8)
    assert reports[-1].formula_bytes == 2 * 1 * 2 * 16 * 8 * 4
    assert reports[-1].nbytes == reports[-1].formula_bytes + 64 * 3 * 4


def test_dummy_and_uninitialised_layers_say_so():
    cache = T.DynamicCache(config=tiny_llama().config)
    report = inspect_cache(cache)
    assert [(l.kind, l.initialized) for l in report.layers] == [("full", False)] * 2
    assert report.layers[0].notes == ("not initialised yet (allocated on first update)",)
    shared = T.Cache(layers=[T.cache_utils.DummyLayer(), T.cache_utils.DynamicLayer()])
    shared.update(torch.zeros(1, 2, 5, 16), torch.zeros(1, 2, 5, 16), 1)
    report = inspect_cache(shared)
    assert [(l.kind, l.filled) for l in report.layers] == [("dummy", None), ("full", 5)]
    assert report.layers[0].notes == ("holds no cache (shared-KV or attention-free layer)",)
    assert report.formula_bytes == report.nbytes == 2 * 1 * 2 * 16 * 5 * 4


def test_meta_device_cache_reads_no_data():
    with torch.device("meta"):
        model = tiny_llama()
        ids = torch.zeros(1, 5, dtype=torch.long)
        dynamic = model(ids, use_cache=True).cache
        static = T.StaticCache(config=model.config, max_cache_len=16)
        model(ids, cache=static, use_cache=True)
    report = inspect_cache(dynamic, config=model.config)
    assert report.device == "meta" and report.seq == 5 and report.nbytes == 2 * 2 * 2 * 16 * 5 * 4
    report = inspect_cache(static)
    layer = report.layers[0]
    assert (layer.capacity, layer.filled, layer.seen) == (16, None, None)  # the length scalar is meta too
    assert "length is a meta tensor: fill unknown" in layer.notes
    assert report.seq is None and report.nbytes == 2 * 2 * 2 * 16 * 16 * 4


def test_offloaded_layer_names_its_home_device():
    model = tiny_llama()
    torch.manual_seed(1)
    cache = model(torch.randint(3, 200, (1, 4)), use_cache=True).cache
    cache.layers[1].device = torch.device("cuda", 0)  # what Cache.offload leaves behind: data on cpu, home cuda
    report = inspect_cache(cache)
    assert [l.home_device for l in report.layers] == [None, "cuda:0"]
    assert report.notes == ("layer 1 offloaded to cpu (home cuda:0)",)


def test_tuple_cache_of_a_plain_pytorch_model():
    model = plain_model()
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    with torch.no_grad():
        _, past = model(ids)
        report7 = inspect_cache(past)
        _, past = model(torch.tensor([[6]]), past)
    report = inspect_cache(past)
    assert report.layout == "tuple of (k, v)" and report.class_name == "tuple"
    assert [(l.kind, l.keys.shape, l.filled) for l in report.layers] == [("full", (1, 4, 6, 8), 6)] * 2
    assert (report7.seq, report.seq, report.kv_heads, report.head_dim) == (5, 6, 4, 8)
    assert report.nbytes == report.formula_bytes == 2 * 2 * 4 * 8 * 6 * 4
    assert looks_like_cache(past) and not looks_like_cache((torch.zeros(2), torch.zeros(2)))


def test_legacy_tuples_of_four_are_self_and_cross():
    k, cross = torch.zeros(1, 4, 3, 8), torch.zeros(1, 4, 7, 8)
    report = inspect_cache(((k, k, cross, cross), (k, k, cross, cross)))
    assert report.parts == ("self", "cross") and report.seq == 3
    assert [l.filled for l in report.part_layers("cross")] == [7, 7]


def test_legacy_iteration_of_a_sliding_cache_is_not_taken_for_full_attention():
    model = tiny_mistral_sliding()
    cache = model(torch.randint(3, 200, (1, 6)), use_cache=True).cache
    legacy = tuple(cache)  # DynamicCache.__iter__: (keys, values, sliding-window tensor) per layer
    report = inspect_cache(legacy)
    assert [(l.kind, l.filled, l.seen, l.window) for l in report.layers] == [("sliding", 3, None, None)] * 2
    assert report.seq is None and report.formula_bytes is None
    assert [m.name for m in report.layers[0].extras] == ["entry[2]"]


def test_tuple_layout_not_understood_is_said_not_guessed():
    layer = tuple_layer((torch.zeros(8, 16, 5), torch.zeros(8, 5, 16)), 0)  # bloom-style (b*h, d, s) keys
    assert layer.filled is None
    assert layer.notes == ("layout (8, 16, 5) / (8, 5, 16) is not (batch, heads, seq, head_dim): length not inferred",)


class LegacyDynamicCache:
    """The transformers 4.4x-4.5x layout: per-layer tensors in ``key_cache``/``value_cache`` lists."""

    def __init__(self, keys, values, seen):
        self.key_cache, self.value_cache, self._seen_tokens = list(keys), list(values), seen


class LegacyStaticCache(LegacyDynamicCache):
    """4.4x StaticCache: preallocated; its get_seq_length() reads key values, so it is never called."""

    def __init__(self, keys, values, max_cache_len):
        super().__init__(keys, values, None)
        self.max_cache_len = max_cache_len

    def get_seq_length(self, layer_idx=0):
        raise AssertionError("reads key values: must not be called")


def test_legacy_key_cache_lists_fallback():
    real = capture(tiny_llama(), steps=2)[-1]
    keys = [l.keys.tensor for l in real.layers]
    values = [l.values.tensor for l in real.layers]
    report = inspect_cache(LegacyDynamicCache(keys, values, seen=7))
    assert report.layout == "key_cache/value_cache lists" and report.class_name == "LegacyDynamicCache"
    assert [(l.keys.shape, l.filled, l.seen) for l in report.layers] == [((1, 2, 7, 16), 7, 7)] * 2
    assert report.nbytes == report.formula_bytes
    static = inspect_cache(LegacyStaticCache([torch.zeros(1, 2, 16, 16)] * 2, [torch.zeros(1, 2, 16, 16)] * 2, 16))
    assert [(l.kind, l.capacity, l.filled) for l in static.layers] == [("static", 16, None)] * 2
    assert static.layers[0].notes == ("preallocated: fill is not tracked without reading key values",)
    empty = inspect_cache(LegacyDynamicCache([torch.tensor([])], [torch.tensor([])], seen=0))
    assert not empty.layers[0].initialized


class LegacyMambaCache:
    """transformers 4.x MambaCache: per-layer conv and ssm states in two lists."""

    def __init__(self):
        self.conv_states = [torch.zeros(1, 64, 4)] * 2
        self.ssm_states = [torch.zeros(1, 64, 16)] * 2


def test_legacy_mamba_states_and_lookalikes():
    report = inspect_cache(LegacyMambaCache())
    assert report.layout == "conv_states/ssm_states lists"
    assert [[(m.name, m.shape) for m in l.states] for l in report.layers] == [
        [("conv_states[0]", (1, 64, 4)), ("ssm_states[0]", (1, 64, 16))],
        [("conv_states[1]", (1, 64, 4)), ("ssm_states[1]", (1, 64, 16))],
    ]
    assert report.seq is None and report.nbytes == 2 * (64 * 4 + 64 * 16) * 4

    class Stack:
        layers = [{"keys": 1}]  # a dict has a .values method: not a cache layer
    assert not looks_like_cache(Stack()) and not looks_like_cache(tiny_llama().model)


def test_find_cache_search_order():
    cache = T.DynamicCache()
    assert find_cache({"x": 1, "past_key_values": cache}) == ("past_key_values", cache)
    assert find_cache({"cache": cache}) == ("cache", cache)
    outputs = T.modeling_outputs.CausalLMOutputWithPast(logits=torch.zeros(1), cache=cache)
    assert find_cache({"outputs": outputs}) == ("outputs.cache", cache)
    assert find_cache({"model_kwargs": {"cache": cache}}) == ("model_kwargs['cache']", cache)
    assert find_cache({"kv_state": cache}) == ("kv_state", cache)

    class Holder:
        def __init__(self):
            self.kv = cache
    assert find_cache({"self": Holder()}) == ("self.kv", cache)
    assert find_cache({"x": torch.zeros(3), "y": [1, 2], "model": tiny_gpt2(), "cache": None}) is None
    pairs = [(torch.zeros(3, 8), torch.zeros(3))] * 4  # (input, target) pairs: a cache only by name
    assert find_cache({"batch": pairs}) is None and find_cache({"past": pairs}) == ("past", pairs)
    k = torch.zeros(1, 2, 3, 4)
    assert find_cache({"new_past": [(k, k)]}) == ("new_past", [(k, k)])


def test_unwrap_and_not_a_cache():
    cache = T.DynamicCache()
    assert unwrap_cache(cache) == ("", cache)
    assert unwrap_cache({"past_key_values": cache}) == ("['past_key_values']", cache)
    assert unwrap_cache(torch.zeros(2)) is None
    with pytest.raises(NotACacheError, match="a dict: no .layers"):
        inspect_cache({"a": 1})


def test_history_entry_is_metadata_only():
    report = capture(tiny_mistral_sliding(), steps=2)[-1]
    entry = history_entry(report, stop=3, cache_id=1, path="cache")
    assert (entry.stop, entry.seq, entry.filled, entry.nbytes) == (3, 7, (3, 3), report.nbytes)
    assert entry.same_state(history_entry(report, stop=4, cache_id=1))


def test_inspect_layer_on_a_hand_made_layer():
    layer = T.cache_utils.DynamicSlidingWindowLayer(sliding_window=6)
    layer.update(torch.zeros(2, 3, 9, 4), torch.zeros(2, 3, 9, 4))
    report = inspect_layer(layer, 5)
    assert (report.index, report.kind, report.filled, report.seen, report.window) == (5, "sliding", 5, 9, 6)
    assert (report.batch, report.kv_heads, report.head_dim) == (2, 3, 4)
