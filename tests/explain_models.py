"""Models broken on purpose for ``explain``: a tiny Llama whose attention skips ``repeat_kv``, and a plain
PyTorch model whose second Linear expects the wrong width.

Usage: ``model = broken_gqa_llama(); model(torch.ones(1, 7, dtype=torch.long))`` raises a RuntimeError in
``skip_repeat_kv_forward`` (4 query heads against 2 key/value heads); ``LinearMismatch()(torch.ones(2, 8))``
raises inside ``nn.Linear`` called from ``LinearMismatch.forward``.
"""

from __future__ import annotations

import types

import torch
from torch import nn

from tiny_models import tiny_llama

__all__ = ["broken_gqa_llama", "skip_repeat_kv_forward", "LinearMismatch"]


def skip_repeat_kv_forward(self, hidden_states, position_embeddings=None, attention_mask=None, **kwargs):
    """LlamaAttention.forward up to the scores, without repeat_kv: the matmul cannot broadcast 4 vs 2 heads."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    input_shape = hidden_states.shape[:-1]
    hidden_shape = (*input_shape, -1, self.head_dim)
    query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
    key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
    cos, sin = position_embeddings
    query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
    attn_weights = query_states @ key_states.transpose(2, 3)
    return attn_weights, None


def broken_gqa_llama():
    """Usage: ``broken_gqa_llama()``; tiny_llama() (GQA 4/2, head_dim 16) with layer 0's attention broken."""
    model = tiny_llama()
    attn = model.model.layers[0].self_attn
    attn.forward = types.MethodType(skip_repeat_kv_forward, attn)
    return model


class LinearMismatch(nn.Module):
    """fc1 gives 16 features, fc2 expects 32."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        h = self.fc1(x).relu()
        return self.fc2(h)
