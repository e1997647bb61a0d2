"""DeepSeek-V3's multi-head latent attention (MLA) under a real debugger: ``kv`` says the cache holds the
compressed latent and the rotary key (not "MQA ... sharded or repeated"), and ``shapes`` in the attention
names q/k/v and the latents from the config's MLA sizes (truth: the config, read here independently)."""

from __future__ import annotations

import inspect
import re

import torch
from tiny_zoo_models import tiny_deepseek_v3
from transcript import debug_transcript, outputs_of


def _stop_line(module_file_module) -> int:
    source, start = inspect.getsourcelines(module_file_module.DeepseekV3Attention.forward)
    return start + next(i for i, line in enumerate(source) if "= attention_interface(" in line)


def test_mla_cache_and_dims():
    model = tiny_deepseek_v3()
    import transformers.models.deepseek_v3.modeling_deepseek_v3 as modeling

    config = model.config
    rank, rope, nope, v_dim = config.kv_lora_rank, config.qk_rope_head_dim, config.qk_nope_head_dim, config.v_head_dim
    assert len({rank, rope, nope, v_dim, nope + rope, config.hidden_size}) == 6  # no size names another
    assert (config.num_attention_heads, config.n_routed_experts) == (4, 4)

    def run():
        return model(torch.randint(0, 256, (2, 7)), use_cache=True)

    out = outputs_of(debug_transcript(run, [f"b {modeling.__file__}:{_stop_line(modeling)}", "c", "shapes", "kv",
                                            "cl 1", "c"], width=200))
    shapes, kv = out[1], out[2]
    assert "internal error" not in shapes + kv
    rows = {line.split()[0]: re.split(r"\s{2,}", line.strip())[-1] for line in shapes.splitlines() if line.strip()}
    assert rows["cache.layers[0].keys"] == "batch · 1 · seq · kv_lora_rank"
    assert rows["cache.layers[0].values"] == "batch · 1 · seq · qk_rope_head_dim"
    assert rows["query_states"] == "batch · heads · seq · qk_head_dim"
    assert rows["key_states"] == "batch · heads · seq · qk_head_dim"
    assert rows["value_states"] == "batch · heads · seq · v_head_dim"
    assert rows["kv_nope"] == "batch · 1 · seq · kv_lora_rank" and rows["k_rot"] == "batch · 1 · seq · qk_rope_head_dim"
    # q_states/q_pass: not a role name; heads (4) is also n_routed_experts here, so only the width is named
    assert rows["q_pass"] == "batch · ? · seq · qk_nope_head_dim" and rows["q_states"] == "batch · ? · seq · qk_head_dim"
    assert rows["hidden_states"] == "batch · seq · hidden"
    assert "MQA" not in kv and "sharded or repeated" not in kv, kv
    assert f"MLA latent / q heads {config.num_attention_heads}" in kv
    assert f"kv_lora_rank {rank} + qk_rope_head_dim {rope}" in kv
    assert f"(kv_lora_rank {rank}), values the rotary key" in kv.replace("\n  ", " ")
    assert f"batch 2 × 2 layers × ({rank} latent + {rope} rope) × 7 seq × 4 B" in kv.replace("\n  ", " ")
