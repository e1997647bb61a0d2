"""Dimension names by role (llmpdb.inspect.dims_roles) on real tiny models whose sizes collide on purpose.

Tiny random configs are where sizes coincide: batch == kv_heads, seq == heads, a cache's capacity equal to
kv_dim, the expert count equal to the head count, the fused q·k·v width equal to the vocabulary. Each test
reads the ``dims`` column of the real ``shapes`` table (``render_tensors``), so it checks what a user sees.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys

import pytest
import torch

from llmpdb.inspect.dims import DimNamer
from llmpdb.inspect.dims_roles import module_sizes, role_of
from llmpdb.inspect.frames import frame_locals
from llmpdb.inspect.tensors import frame_tensors, walk_tensors
from llmpdb.render.tensors import render_tensors
from tiny_models import plain_model, tiny_gpt2, tiny_llama, tiny_t5


def dims_column(walk, namer, stats: bool = False) -> dict[str, str]:
    """``{path: dims}`` read from the rendered table (wide enough that nothing is cut)."""
    lines = render_tensors(walk, width=400, namer=namer, stats=stats).splitlines()
    start = lines[0].index("dims")
    rows = {}
    for line in lines[1:len(walk) + 1]:
        rows[line.split()[0]] = line[start:].strip()
    return rows


def stop_in(model, module, forward_class, run):
    """Run ``run()``; when ``module``'s forward ends, capture ``shapes`` of the enclosing
    ``forward_class.forward`` frame (a real, running frame) the way the command builds it."""
    seen = {}

    def hook(mod, args, output):
        frame = sys._getframe()
        while frame is not None and frame.f_code is not inspect.unwrap(forward_class.forward).__code__:
            frame = frame.f_back
        locals_ = frame_locals(frame)
        namer = DimNamer.from_frame(locals_, frame=frame)
        seen["dims"] = dims_column(frame_tensors(locals_), namer)
        seen["source"] = namer.source

    handle = module.register_forward_hook(hook)
    try:
        with torch.no_grad():
            run()
    finally:
        handle.remove()
    return seen


def test_role_of_paths():
    assert role_of("outputs.past_key_values.layers[0].keys") == "cache_kv"
    assert role_of("cache.self_attention_cache.layers[1].values") == "cache_kv"
    assert role_of("past_key_values[0][1]") == "cache_kv" and role_of("layer_past[0]") == "cache_kv"
    assert role_of("cache.key_cache[3]") == "cache_kv"
    assert role_of("outputs.router_logits[0]") == "router"
    assert role_of("outputs.attentions[1]") == "attn_weights"
    assert role_of("inputs['input_ids']") == "ids"
    assert role_of("self.qkv_proj(hidden_states)") is None and role_of("x") is None
    assert role_of("past[2]") is None  # a third entry is no (key, value) half
    assert role_of("batch['values']") is None and role_of("stats.values") is None  # a dict key, a plain attribute
    assert role_of("self.keys") == "cache_kv"  # inside a cache layer's own method


def test_unknown_model_sizes_are_not_named_outside_a_cache():
    namer = DimNamer.from_config(None, batch=32, seq=5)          # a classifier: no config, 10 classes
    assert namer.describe((32, 10), path="logits") == "batch · ?"
    assert namer.describe((32, 4, 5, 8), path="attn_weights") == "batch · ? · q_seq · k_seq"
    assert namer.describe((32, 4, 5, 8), path="past_key_values[0][0]") == "batch · heads · seq · head_dim"


def test_gemma2_sliding_window_keys_are_batch_kv_heads_seq_head_dim():
    from transformers import Gemma2Config, Gemma2ForCausalLM

    torch.manual_seed(0)
    config = Gemma2Config(vocab_size=64, hidden_size=48, intermediate_size=96, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, head_dim=12, sliding_window=5,
                          max_position_embeddings=64)
    model = Gemma2ForCausalLM(config).eval()
    input_ids = torch.zeros(1, 6, dtype=torch.long)
    with torch.no_grad():
        outputs = model(input_ids=input_ids, use_cache=True)
    local = {"model": model, "input_ids": input_ids, "outputs": outputs}
    dims = dims_column(frame_tensors(local), DimNamer.from_frame(local))
    # the sliding layer keeps 4 positions: 4 is the window's length, not the head count
    assert outputs.past_key_values.layers[0].keys.shape == (1, 2, 4, 12)
    assert dims["outputs.cache.layers[0].keys"] == "batch · kv_heads · seq · head_dim"
    assert dims["outputs.cache.layers[1].values"] == "batch · kv_heads · seq · head_dim"
    assert dims["outputs.logits"] == "batch · seq · vocab"


def test_static_cache_capacity_is_the_sequence_axis_not_kv_dim():
    from transformers import StaticCache

    model = tiny_llama()  # kv_heads 2 × head_dim 16 = kv_dim 32 = the cache's capacity
    cache = StaticCache(config=model.config, max_cache_len=32)
    input_ids = torch.zeros(1, 5, dtype=torch.long)
    with torch.no_grad():
        model(input_ids=input_ids, past_key_values=cache, use_cache=True)
    local = {"model": model, "input_ids": input_ids, "cache": cache}
    dims = dims_column(frame_tensors(local), DimNamer.from_frame(local))
    assert cache.layers[0].keys.shape == (1, 2, 32, 16)
    assert dims["cache.layers[0].keys"] == "batch · kv_heads · seq · head_dim"


def test_mixtral_router_logits_are_tokens_by_experts():
    from transformers import MixtralConfig, MixtralForCausalLM

    torch.manual_seed(0)
    config = MixtralConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
                           num_experts_per_tok=2, max_position_embeddings=64)
    model = MixtralForCausalLM(config).eval()
    input_ids = torch.zeros(2, 16, dtype=torch.long)   # batch 2 == kv_heads; 32 tokens == hidden
    with torch.no_grad():
        outputs = model(input_ids=input_ids, output_router_logits=True)
    local = {"model": model, "input_ids": input_ids, "router_logits": outputs.router_logits}
    dims = dims_column(frame_tensors(local), DimNamer.from_frame(local))
    assert outputs.router_logits[0].shape == (32, 4)   # 4 experts == 4 heads
    assert dims["router_logits[0]"] == "tokens · experts"
    assert dims["input_ids"] == "batch · seq"


@dataclasses.dataclass
class GPTConfig:
    """nanoGPT's config, as nanoGPT writes it."""

    block_size: int = 64
    vocab_size: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 32


def test_nanogpt_style_tuple_cache_with_seq_equal_to_head_dim():
    model = plain_model()                              # 4 heads of 8; 8 positions: seq == head_dim
    ids = torch.zeros(2, 8, dtype=torch.long)
    with torch.no_grad():
        logits, past = model(ids)
    local = {"config": GPTConfig(), "past": past, "layer_past": list(past[1])}
    dims = dims_column(frame_tensors(local), DimNamer.from_frame(local))
    assert past[0][0].shape == (2, 4, 8, 8)
    assert dims["past[0][0]"] == "batch · heads · seq · head_dim"
    assert dims["layer_past[1]"] == "batch · heads · seq · head_dim"


def test_pure_pytorch_attention_frame_uses_the_modules_own_sizes():
    model = plain_model()
    block = model.blocks[0]
    assert module_sizes(block) == {"heads": 4, "head_dim": 8, "qkv": 96}
    seen = stop_in(model, block.out, type(block), lambda: model(torch.zeros(2, 5, dtype=torch.long)))
    assert seen["source"] == "self (PlainAttention)"
    assert seen["dims"]["q"] == "batch · heads · seq · head_dim"
    assert seen["dims"]["k"] == "batch · heads · seq · head_dim"
    # seq 4 == heads 4: a plain `q` may be (b, h, s, d) or (b, s, h, d); the two axes are not guessed
    seen = stop_in(model, block.out, type(block), lambda: model(torch.zeros(2, 4, dtype=torch.long)))
    assert seen["dims"]["q"] == "batch · ? · ? · head_dim"


def test_phi3_fused_qkv_is_named_qkv_not_intermediate_or_vocab():
    from transformers import Phi3Config, Phi3ForCausalLM

    torch.manual_seed(0)
    config = Phi3Config(vocab_size=96, hidden_size=48, intermediate_size=96, num_hidden_layers=1,
                        num_attention_heads=4, num_key_value_heads=2, pad_token_id=0, bos_token_id=1,
                        eos_token_id=2, max_position_embeddings=64)
    model = Phi3ForCausalLM(config).eval()
    attn = model.model.layers[0].self_attn
    seen = stop_in(model, attn.o_proj, type(attn), lambda: model(torch.zeros(1, 9, dtype=torch.long)))
    assert seen["dims"]["qkv"] == "batch · seq · qkv"             # 96 == intermediate == vocab
    assert seen["dims"]["query_states"] == "batch · heads · seq · head_dim"
    assert seen["dims"]["key_states"] == "batch · kv_heads · seq · head_dim"
    assert seen["dims"]["hidden_states"] == "batch · seq · hidden"


def test_llama_with_batch_equal_to_kv_heads_and_seq_equal_to_heads():
    model = tiny_llama(attn_implementation="eager")
    attn = model.model.layers[0].self_attn
    input_ids = torch.zeros(2, 4, dtype=torch.long)   # batch 2 == kv_heads 2, seq 4 == heads 4
    seen = stop_in(model, attn.o_proj, type(attn), lambda: model(input_ids=input_ids))
    dims = seen["dims"]
    assert dims["query_states"] == "batch · heads · seq · head_dim"
    assert dims["key_states"] == "batch · kv_heads · seq · head_dim"
    assert dims["attn_weights"] == "batch · heads · q_seq · k_seq"
    assert dims["hidden_states"] == "batch · seq · hidden"
    with torch.no_grad():
        outputs = model(input_ids=input_ids)
    local = {"model": model, "input_ids": input_ids, "outputs": outputs,
             "t": torch.zeros(2, 4, 4, 16), "w": torch.zeros(2, 7)}
    dims = dims_column(frame_tensors(local), DimNamer.from_frame(local))
    assert dims["input_ids"] == "batch · seq"                     # not "batch|kv_heads"
    assert dims["outputs.logits"] == "batch · seq · vocab"
    assert dims["outputs.cache.layers[0].keys"] == "batch · kv_heads · seq · head_dim"
    # no role: by size only where exactly one name fits, and never "kv_heads" for the leading dimension
    assert dims["t"] == "batch · ? · ? · head_dim"
    assert dims["w"] == "batch · ?"


def test_gpt2_mlp_frame_uses_the_root_models_config():
    model = tiny_gpt2()
    mlp = model.transformer.h[0].mlp
    seen = stop_in(model, mlp.act, type(mlp), lambda: model(torch.zeros(2, 4, dtype=torch.long)))
    assert seen["dims"]["hidden_states"] == "batch · seq · intermediate"
    assert seen["source"].startswith("self.config of GPT2")


def test_t5_caches_and_attentions_with_seq_equal_to_heads():
    model = tiny_t5(attn_implementation="eager")
    input_ids = torch.ones(2, 4, dtype=torch.long)
    decoder_input_ids = torch.ones(2, 3, dtype=torch.long)
    with torch.no_grad():
        outputs = model(input_ids=input_ids, decoder_input_ids=decoder_input_ids, output_attentions=True,
                        use_cache=True)
    local = {"model": model, "input_ids": input_ids, "decoder_input_ids": decoder_input_ids,
             "outputs": outputs}
    walk = frame_tensors(local)
    dims = dims_column(walk, DimNamer.from_frame(local))
    cross = [p for p in dims if "cross_attention_cache" in p and p.endswith(".keys")][0]
    assert dims[cross] == "batch · heads · seq · head_dim"        # (2, 4, 4, 8): seq 4 == heads 4
    assert dims["outputs.encoder_attentions[0]"] == "batch · heads · q_seq · k_seq"
    assert dims["outputs.encoder_last_hidden_state"] == "batch · seq · hidden"


def test_stats_table_keeps_the_dims_column():
    model = tiny_llama()
    input_ids = torch.zeros(1, 5, dtype=torch.long)
    with torch.no_grad():
        outputs = model(input_ids=input_ids)
    local = {"model": model, "input_ids": input_ids, "logits": outputs.logits}
    walk = frame_tensors(local, stats=True)
    text = render_tensors(walk, width=400, namer=DimNamer.from_frame(local), stats=True)
    header = text.splitlines()[0].split()
    assert header[-1] == "dims" and "mean" in header
    assert dims_column(walk, DimNamer.from_frame(local), stats=True)["logits"] == "batch · seq · vocab"


@pytest.mark.parametrize("shape, path, expected", [
    ((1, 2, 7, 16), "cache.layers[0].keys", "batch · kv_heads · seq · head_dim"),
    ((1, 7, 2, 16), "k", "batch · seq · kv_heads · head_dim"),         # a transposed key: by position
    ((1, 1, 5, 5), "attention_mask", "batch · 1 · q_seq · k_seq"),     # a broadcast head axis prints 1
    ((1, 4, 1, 16), "query_states", "batch · heads · seq · head_dim"),  # a decode step: seq is 1
    ((1, 3, 256), "logits", "batch · seq · vocab"),
    ((1, 5, 99), "logits", "batch · seq · ?"),                          # no layout fits: by size
])
def test_layouts_by_position(shape, path, expected):
    namer = DimNamer.from_config(tiny_llama().config, batch=1, seq=5)
    assert namer.describe(shape, path=path) == expected
    assert walk_tensors(torch.zeros(shape), path)[0].path == path
