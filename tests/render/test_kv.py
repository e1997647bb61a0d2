"""llmpdb.render.kv: exact text at width 100 for real caches of tiny models (and hand-made ones)."""

from __future__ import annotations

import torch
import transformers as T
from tiny_models import tiny_llama, tiny_mistral_sliding, tiny_t5

from llmpdb.inspect.kv import KvHistoryEntry, inspect_cache
from llmpdb.inspect.stats import tensor_stats
from llmpdb.render.kv import render_cache, render_history, render_layer
from llmpdb.render.style import Style, strip_ansi
from llmpdb.units import format_shape


def last_cache_report(model, steps: int = 2, **generate_kwargs):
    """The report of the cache the last forward of a greedy generate() received (prompt 7 tokens)."""
    seen = []

    def hook(module, args, kwargs):
        seen.append(inspect_cache(kwargs["cache"], config=module.config))

    handle = model.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        torch.manual_seed(1)
        model.generate(torch.randint(3, 200, (1, 7)), max_new_tokens=steps, do_sample=False, **generate_kwargs)
    finally:
        handle.remove()
    return seen[-1]


def text(*lines: str) -> str:
    return "\n".join(lines)


def test_dynamic_gqa_cache():
    assert render_cache(last_cache_report(tiny_llama(), 3), width=100, path="cache") == text(
        "cache: DynamicCache  2 layers  seq 8 (filled)  kv heads 2 / q heads 4 (GQA ×2)  head_dim 16  f32 cpu",
        "  4.0 KiB",
        "memory 4.0 KiB = 2 × 2 layers × 2 kv heads × 16 head_dim × 8 seq × 4 B",
        "layer  type  keys           values         filled/capacity  window",
        "0      full  (1, 2, 8, 16)  (1, 2, 8, 16)  8 / —            —",
        "1      full  (1, 2, 8, 16)  (1, 2, 8, 16)  8 / —            —",
    )


def test_static_cache_and_its_layer():
    report = last_cache_report(tiny_llama(), 3, cache_implementation="static")
    assert render_cache(report, width=100) == text(
        "StaticCache  2 layers  seq 8 filled / 9 capacity  kv heads 2 / q heads 4 (GQA ×2)  head_dim 16",
        "  f32 cpu  4.5 KiB",
        "memory 4.5 KiB ≠ 4.0 KiB from 2 × 2 layers × 2 kv heads × 16 head_dim × 8 seq × 4 B: static capacity",
        "  9 allocated for seq 8",
        "layer  type    keys           values         filled/capacity  window",
        "0      static  (1, 2, 9, 16)  (1, 2, 9, 16)  8 / 9            —",
        "1      static  (1, 2, 9, 16)  (1, 2, 9, 16)  8 / 9            —",
    )
    assert render_layer(report, report.layer(1), width=100) == text(
        "layer 1  static  StaticLayer  filled 8 / 9  of StaticCache",
        "tensor             shape          dtype  device    bytes",
        "keys               (1, 2, 9, 16)  f32    cpu     1.1 KiB",
        "values             (1, 2, 9, 16)  f32    cpu     1.1 KiB",
        "cumulative_length  ()             i64    cpu         8 B",
        "position 8 of the preallocated tensors is not filled yet",
    )


def test_sliding_window_cache():
    assert render_cache(last_cache_report(tiny_mistral_sliding(), 3), width=100) == text(
        "DynamicCache  2 layers  seq 8  kv heads 2 / q heads 4 (GQA ×2)  head_dim 16  f32 cpu  1.5 KiB",
        "memory 1.5 KiB ≠ 4.0 KiB from 2 × 2 layers × 2 kv heads × 16 head_dim × 8 seq × 4 B: sliding window",
        "  4 keeps 3 of 8 tokens (layers 0-1)",
        "layer  type     keys           values         filled/capacity  seen  window",
        "0      sliding  (1, 2, 3, 16)  (1, 2, 3, 16)  3 / —            8     4",
        "1      sliding  (1, 2, 3, 16)  (1, 2, 3, 16)  3 / —            8     4",
    )


def test_encoder_decoder_cache():
    assert render_cache(last_cache_report(tiny_t5(), 3), width=100, path="past_key_values") == text(
        "past_key_values: EncoderDecoderCache  2 layers (self + cross)  seq 2 (filled)  cross 7",
        "  kv heads 4 / q heads 4 (MHA)  head_dim 8  f32 cpu  4.5 KiB",
        "memory 4.5 KiB ≠ 1.0 KiB from 2 × 2 layers × 4 kv heads × 8 head_dim × 2 seq × 4 B: cross-attention",
        "  part adds 3.5 KiB (encoder length 7)",
        "part   layer  type  keys          values        filled/capacity  window",
        "self   0      full  (1, 4, 2, 8)  (1, 4, 2, 8)  2 / —            —",
        "self   1      full  (1, 4, 2, 8)  (1, 4, 2, 8)  2 / —            —",
        "cross  0      full  (1, 4, 7, 8)  (1, 4, 7, 8)  7 / —            —",
        "cross  1      full  (1, 4, 7, 8)  (1, 4, 7, 8)  7 / —            —",
    )


def test_quantized_cache_and_its_layer():
    model = tiny_llama()
    report = last_cache_report(model, 3, cache=T.QuantizedCache("fp8", model.config))
    assert render_cache(report, width=100) == text(
        "QuantizedCache  2 layers  seq 8  kv heads 2 / q heads 4 (GQA ×2)  head_dim 16",
        "  f32 (stored f8e4m3) cpu  1.0 KiB",
        "memory 1.0 KiB ≠ 4.0 KiB from 2 × 2 layers × 2 kv heads × 16 head_dim × 8 seq × 4 B: layers 0-1",
        "  quantized (8 tokens stored as f8e4m3, residual 0 in f32)",
        "layer  type       keys  values  filled/capacity  seen  quantized       window",
        "0      quantized  (0,)  (0,)    0 / —            8     8 + 0 residual  —",
        "1      quantized  (0,)  (0,)    0 / —            8     8 + 0 residual  —",
    )
    assert render_layer(report, report.layer(0), width=100) == text(
        "layer 0  quantized  Fp8QuantizedLayer  filled 0 / —  seen 8  quantized 8 + residual 0",  # 102 > 100
        "  of QuantizedCache",
        "tensor                shape          dtype   device  bytes",
        "keys                  (0,)           f32     cpu       0 B",
        "values                (0,)           f32     cpu       0 B",
        "_quantized_keys[0]    (1, 2, 8, 16)  f8e4m3  cpu     256 B",
        "_quantized_keys[1]    ()             f32     cpu       4 B",
        "_quantized_values[0]  (1, 2, 8, 16)  f8e4m3  cpu     256 B",
        "_quantized_values[1]  ()             f32     cpu       4 B",
    )


def test_linear_attention_hybrid():
    torch.manual_seed(0)
    config = T.Lfm2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, layer_types=["conv", "full_attention"])
    assert render_cache(last_cache_report(T.Lfm2ForCausalLM(config).eval(), 3), width=100) == text(
        "DynamicCache  2 layers  seq 8 (filled)  kv heads 2 / q heads 4 (GQA ×2)  head_dim 16  f32 cpu",
        "  2.8 KiB",
        "memory 2.8 KiB ≠ 2.0 KiB from 2 × 1 layer × 2 kv heads × 16 head_dim × 8 seq × 4 B: layer 0 holds",
        "  linear-attention states (768 B)",
        "layer  type    keys           values         filled/capacity  window  states",
        "0      linear  —              —              n/a              —       conv[0] (1, 64, 3)",
        "1      full    (1, 2, 8, 16)  (1, 2, 8, 16)  8 / —            —       —",
    )


def test_offloaded_layers_get_a_device_column():
    model = tiny_llama()
    torch.manual_seed(1)
    cache = model(torch.randint(3, 200, (1, 4)), use_cache=True).cache
    cache.layers[1].device = torch.device("cuda", 0)  # what offloading leaves: data on cpu, home on cuda
    assert render_cache(inspect_cache(cache), width=100) == text(
        "DynamicCache  2 layers  seq 4 (filled)  kv heads 2  head_dim 16  f32 cpu  2.0 KiB",
        "memory 2.0 KiB = 2 × 2 layers × 2 kv heads × 16 head_dim × 4 seq × 4 B",
        "layer  type  keys           values         filled/capacity  window  device",
        "0      full  (1, 2, 4, 16)  (1, 2, 4, 16)  4 / —            —       cpu",
        "1      full  (1, 2, 4, 16)  (1, 2, 4, 16)  4 / —            —       cpu (home cuda:0)",
        "layer 1 offloaded to cpu (home cuda:0)",
    )


def test_meta_static_cache_and_stats_refused():
    with torch.device("meta"):
        model = tiny_llama()
        cache = T.StaticCache(config=model.config, max_cache_len=16)
        model(torch.zeros(1, 5, dtype=torch.long), cache=cache, use_cache=True)
    report = inspect_cache(cache)
    assert render_cache(report, width=100) == text(
        "StaticCache  2 layers  seq ?  kv heads 2  head_dim 16  f32 meta  0 B resident (meta)",
        "layer  type    keys            values          filled/capacity  window",
        "0      static  (1, 2, 16, 16)  (1, 2, 16, 16)  — / 16           —",
        "1      static  (1, 2, 16, 16)  (1, 2, 16, 16)  — / 16           —",
        "layers 0-1: length is a meta tensor: fill unknown",
    )
    layer = report.layer(0)
    stats = {m.name: tensor_stats(m.tensor) or "meta" for m in layer.tensors}
    assert render_layer(report, layer, stats=stats, width=100) == text(
        "layer 0  static  StaticLayer  filled — / 16  of StaticCache",
        "tensor             shape           dtype  device  bytes   min  max  mean  std  nan  inf",
        "keys               (1, 2, 16, 16)  f32    meta     meta  meta",
        "values             (1, 2, 16, 16)  f32    meta     meta  meta",
        "cumulative_length  ()              i64    meta     meta  meta",
        "length is a meta tensor: fill unknown",
    )


def test_uninitialised_cache():
    assert render_cache(inspect_cache(T.DynamicCache(config=tiny_llama().config)), width=100) == text(
        "DynamicCache  2 layers  empty  0 B",
        "layer  type  keys  values  filled/capacity  window",
        "0      full  —     —       — / —            —",
        "1      full  —     —       — / —            —",
        "layers 0-1: not initialised yet (allocated on first update)",
    )


def test_many_identical_layers_collapse_into_one_row():
    k = torch.zeros(1, 2, 5, 4)
    cache = tuple((k, k) for _ in range(12)) + ((torch.zeros(1, 2, 3, 4),) * 2,)
    assert render_cache(inspect_cache(cache), width=100) == text(
        "tuple  13 layers  seq 5  kv heads 2  head_dim 4  f32 cpu  3.9 KiB",
        "memory 3.9 KiB ≠ 4.1 KiB from 2 × 13 layers × 2 kv heads × 4 head_dim × 5 seq × 4 B: layer 12 holds",
        "  fewer tokens (3: not yet updated in this forward?)",
        "layer  type  keys          values        filled/capacity  window",
        "0-11   full  (1, 2, 5, 4)  (1, 2, 5, 4)  5 / —            —",
        "12     full  (1, 2, 3, 4)  (1, 2, 3, 4)  3 / —            —",
    )


def test_layer_stats_with_nan_and_inf():
    cache = T.DynamicCache()
    keys = torch.arange(40, dtype=torch.float32).reshape(1, 2, 5, 4)
    values = keys.clone()
    values[0, 0, 0, 0] = float("nan")
    values[0, 1, 4, 3] = float("inf")
    cache.update(keys, values, 0)
    report = inspect_cache(cache)
    layer = report.layer(0)
    stats = {m.name: tensor_stats(m.tensor) for m in layer.tensors}
    assert render_layer(report, layer, stats=stats, width=100) == text(
        "layer 0  full  DynamicLayer  filled 5 / —  of DynamicCache",
        "tensor  shape         dtype  device  bytes  min  max  mean    std  nan  inf",
        "keys    (1, 2, 5, 4)  f32    cpu     160 B    0   39  19.5  11.69    0    0",
        "values  (1, 2, 5, 4)  f32    cpu     160 B    1   38  19.5  11.11    1    1",
    )


HISTORY = [
    KvHistoryEntry(2, 1, "DynamicCache", "cache", 7, (7, 7), 3584),
    KvHistoryEntry(3, 1, "DynamicCache", "cache", 8, (8, 8), 4096),
    KvHistoryEntry(4, 1, "DynamicCache", "cache", 9, (9, 9), 4608),
    KvHistoryEntry(6, 1, "DynamicCache", "cache", 7, (7, 7), 3584),  # same object id, shorter: a new generate
    KvHistoryEntry(7, 2, "StaticCache", "outputs.cache", 8, (8, 3), 4608),
]


def test_history_of_one_cache():
    assert render_history(HISTORY[:3], width=100) == text(
        "kv history: 3 stops, 1 cache",
        "DynamicCache (cache): seq 7 -> 8 -> 9 (+1 per stop)",
        "stop  cache         seq  filled per layer  bytes    growth",
        "   2  DynamicCache  7    7 ×2              3.5 KiB",
        "   3  DynamicCache  8    8 ×2              4.0 KiB  +1",
        "   4  DynamicCache  9    9 ×2              4.5 KiB  +1",
    )


def test_history_splits_runs():
    assert render_history(HISTORY, width=100) == text(
        "kv history: 5 stops, 3 caches",
        "run 1  DynamicCache (cache): seq 7 -> 8 -> 9 (+1 per stop)",
        "run 2  DynamicCache (cache): seq 7",
        "run 3  StaticCache (outputs.cache): seq 8",
        "stop  run  cache         seq  filled per layer  bytes    growth",
        "   2  1    DynamicCache  7    7 ×2              3.5 KiB",
        "   3  1    DynamicCache  8    8 ×2              4.0 KiB  +1",
        "   4  1    DynamicCache  9    9 ×2              4.5 KiB  +1",
        "   6  2    DynamicCache  7    7 ×2              3.5 KiB",
        "   7  3    StaticCache   8    8 3               4.5 KiB",
    )
    assert render_history([]).startswith("kv history: nothing recorded yet")


def test_long_history_shows_the_latest_rows():
    entries = [KvHistoryEntry(i, 1, "DynamicCache", "", 6 + i, (6 + i,), 100 * i) for i in range(1, 26)]
    out = render_history(entries, width=100).splitlines()
    assert out[1] == "DynamicCache: seq 7 -> 8 -> 9 -> … -> 28 -> 29 -> 30 -> 31 (+1 per stop)"
    assert out[3].split()[:3] == ["6", "DynamicCache", "12"] and out[-1] == "(5 earlier stops not shown)"
    assert len(out) == 3 + 20 + 1


def test_narrow_width_wraps_the_summary_but_never_cuts_shapes():
    out = render_cache(last_cache_report(tiny_llama(), 3), width=60, path="cache")
    assert out.splitlines()[:4] == [
        "cache: DynamicCache  2 layers  seq 8 (filled)",
        "  kv heads 2 / q heads 4 (GQA ×2)  head_dim 16  f32 cpu",
        "  4.0 KiB",
        "memory 4.0 KiB = 2 × 2 layers × 2 kv heads × 16 head_dim × 8",
    ]
    # the table fits too: its header shortens "filled/capacity" to "fill/cap" (it was 66 wide)
    assert "0      full  (1, 2, 8, 16)  (1, 2, 8, 16)  8 / —     —" in out
    assert max(len(line) for line in out.splitlines()) <= 60


def test_colour_only_adds_ansi():
    report = last_cache_report(tiny_llama(), 2)
    coloured = render_cache(report, width=100, style=Style(True), path="cache")
    assert "\x1b[1mDynamicCache\x1b[0m" in coloured and "\x1b[36mcache\x1b[0m" in coloured
    assert strip_ansi(coloured) == render_cache(report, width=100, path="cache")


def test_helpers():
    assert (format_shape((1, 2, 9, 32)), format_shape((7,)), format_shape(())) == ("(1, 2, 9, 32)", "(7,)", "()")


def test_legacy_sliding_tuples_say_what_is_unknown():
    model = tiny_mistral_sliding()
    cache = model(torch.randint(3, 200, (1, 6)), use_cache=True).cache
    assert render_cache(inspect_cache(tuple(cache)), width=100) == text(
        "tuple  2 layers  seq ?  kv heads 2  head_dim 16  f32 cpu  1.5 KiB",
        "layer  type     keys           values         filled/capacity  seen  window",
        "0      sliding  (1, 2, 3, 16)  (1, 2, 3, 16)  3 / —            —     ?",
        "1      sliding  (1, 2, 3, 16)  (1, 2, 3, 16)  3 / —            —     ?",
        "layers 0-1: sliding layer in transformers' legacy form: window size (a 0-d tensor) not read, tokens",
        "  seen unknown",
    )
