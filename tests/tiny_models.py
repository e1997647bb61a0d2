"""Tiny random transformers and plain PyTorch models for tests.

Usage: ``model = tiny_llama()``; every builder seeds torch so shapes *and* values repeat.
No weights are downloaded: configs are built in code.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["tiny_llama", "tiny_gpt2", "tiny_t5", "tiny_mistral_sliding", "PlainLM", "plain_model"]

# Llama with grouped-query attention: 4 query heads share 2 key/value heads.
LLAMA_DIMS = dict(
    vocab_size=256,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
)


def tiny_llama(**overrides):
    """Usage: ``tiny_llama(num_hidden_layers=3)``; a LlamaForCausalLM in eval mode, GQA 4/2, head_dim 16."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(**{**LLAMA_DIMS, **overrides})
    return LlamaForCausalLM(config).eval()


def tiny_gpt2(**overrides):
    """Usage: ``tiny_gpt2()``; a GPT2LMHeadModel, 2 layers, 4 heads, n_embd 32."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(**{**dict(vocab_size=256, n_positions=64, n_embd=32, n_layer=2, n_head=4, bos_token_id=0, eos_token_id=0), **overrides})
    return GPT2LMHeadModel(config).eval()


def tiny_t5(**overrides):
    """Usage: ``tiny_t5()``; a T5ForConditionalGeneration, 2+2 layers, d_model 32, 4 heads of 8."""
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    dims = dict(vocab_size=256, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
                decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    return T5ForConditionalGeneration(T5Config(**{**dims, **overrides})).eval()


def tiny_mistral_sliding(**overrides):
    """Usage: ``tiny_mistral_sliding()``; a MistralForCausalLM with sliding_window=4 (GQA 4/2)."""
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(0)
    config = MistralConfig(**{**LLAMA_DIMS, "sliding_window": 4, **overrides})
    return MistralForCausalLM(config).eval()


class PlainAttention(nn.Module):
    """A pure-PyTorch causal self-attention that keeps its cache as a ``(k, v)`` tuple."""

    def __init__(self, dim: int = 32, heads: int = 4):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x, past=None):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if past is not None:
            k = torch.cat([past[0], k], dim=2)
            v = torch.cat([past[1], v], dim=2)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=past is None)
        return self.out(y.transpose(1, 2).reshape(b, s, d)), (k, v)


class PlainLM(nn.Module):
    """A plain ``nn.Module`` language model: embedding, attention blocks, head; cache = tuple of (k, v)."""

    def __init__(self, vocab: int = 64, dim: int = 32, heads: int = 4, layers: int = 2):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(PlainAttention(dim, heads) for _ in range(layers))
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids, past=None):
        x = self.embed(ids)
        new_past = []
        for i, block in enumerate(self.blocks):
            h, kv = block(x, None if past is None else past[i])
            x = x + h
            new_past.append(kv)
        return self.head(x), tuple(new_past)


def plain_model(**kwargs) -> PlainLM:
    """Usage: ``plain_model(layers=3)``; a seeded PlainLM in eval mode."""
    torch.manual_seed(0)
    return PlainLM(**kwargs).eval()
