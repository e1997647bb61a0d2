"""Tiny random models of architectures beyond ``tiny_models``: MLA (DeepSeek-V3), state-space (Mamba) and
hybrid (Jamba) layers. Built in code, seeded; a transformers release without the class raises
``pytest.skip`` with the reason.

Usage: ``model = tiny_deepseek_v3()``; ``tiny_mamba()``; ``tiny_jamba()``.
"""

from __future__ import annotations

import pytest
import torch

__all__ = ["tiny_deepseek_v3", "tiny_mamba", "tiny_jamba", "MLA_DIMS"]

# Every MLA size distinct from every other size, so that a name by size is never a coincidence.
MLA_DIMS = dict(vocab_size=256, hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, n_routed_experts=4,
                num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1, kv_lora_rank=16,
                q_lora_rank=24, qk_rope_head_dim=6, qk_nope_head_dim=14, v_head_dim=10, n_group=1, topk_group=1,
                max_position_embeddings=128)


def _classes(*names: str):
    transformers = pytest.importorskip("transformers")
    missing = [n for n in names if not hasattr(transformers, n)]
    if missing:
        pytest.skip(f"transformers {transformers.__version__} has no {', '.join(missing)}")
    return [getattr(transformers, n) for n in names]


def tiny_deepseek_v3(**overrides):
    """Usage: ``tiny_deepseek_v3()``; a DeepseekV3ForCausalLM with MLA (kv_lora_rank 16, rope 6, nope 14, v 10)."""
    config_class, model_class = _classes("DeepseekV3Config", "DeepseekV3ForCausalLM")
    torch.manual_seed(0)
    return model_class(config_class(**{**MLA_DIMS, **overrides})).eval()


def tiny_mamba(**overrides):
    """Usage: ``tiny_mamba()``; a MambaForCausalLM, hidden 32, expand 2 (intermediate 64), conv kernel 4."""
    config_class, model_class = _classes("MambaConfig", "MambaForCausalLM")
    torch.manual_seed(0)
    dims = dict(vocab_size=256, hidden_size=32, state_size=8, num_hidden_layers=2, expand=2, conv_kernel=4)
    return model_class(config_class(**{**dims, **overrides})).eval()


def tiny_jamba(**overrides):
    """Usage: ``tiny_jamba()``; a JambaForCausalLM: 2 layers, mamba then attention (attn_layer_offset 1)."""
    config_class, model_class = _classes("JambaConfig", "JambaForCausalLM")
    torch.manual_seed(0)
    dims = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2,
                expert_layer_offset=1, num_experts=2, num_experts_per_tok=1, mamba_d_state=8, mamba_d_conv=4,
                mamba_expand=2, mamba_dt_rank=8, use_mamba_kernels=False)
    return model_class(config_class(**{**dims, **overrides})).eval()
