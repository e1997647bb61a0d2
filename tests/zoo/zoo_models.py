"""The zoo's architectures, built tiny in code (random weights, no download), with sizes that collide on
purpose: batch == kv_heads == 2, seq == heads == sliding window == conv kernel == 4.

Usage::

    spec = ARCHS["llama"]
    model = spec.build()          # eval mode, seeded
    inputs = spec.inputs()        # the forward's keyword arguments
    spec.key_dims                 # the roles of a cache's keys, from the config (None: no attention cache)

An architecture the installed transformers lacks raises ``pytest.skip`` with the class it missed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import torch

BATCH, SEQ, HEADS, KV_HEADS, HEAD_DIM, HIDDEN, VOCAB, FFN = 2, 4, 4, 2, 8, 32, 96, 48
WINDOW = 4

COMMON = dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=2,
              num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM,
              max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2)


def _classes(config_name: str, model_name: str):
    import transformers

    missing = [n for n in (config_name, model_name) if not hasattr(transformers, n)]
    if missing:
        pytest.skip(f"transformers {transformers.__version__} has no {missing[0]}")
    return getattr(transformers, config_name), getattr(transformers, model_name)


@dataclass
class Arch:
    """One architecture: how to build it, its inputs, the truth the zoo checks answers against."""

    name: str
    config_name: str
    model_name: str
    config: dict
    kind: str = "causal"          # causal | seq2seq | encoder | ssm | hybrid | plain
    kv_heads: int | None = KV_HEADS
    heads: int = HEADS
    head_dim: int | None = HEAD_DIM
    attention_class: str | None = None  # the class of the module a `bm` stops in (attention, or mixer)
    extra: dict = field(default_factory=dict)

    def build(self):
        config_cls, model_cls = _classes(self.config_name, self.model_name)
        torch.manual_seed(0)
        config = config_cls(**self.config)
        if hasattr(config, "_attn_implementation"):
            config._attn_implementation = "eager"
        return model_cls(config).eval()

    def inputs(self) -> dict:
        gen = torch.Generator().manual_seed(1)
        ids = torch.randint(3, VOCAB, (BATCH, SEQ), generator=gen)
        if self.kind == "seq2seq":
            return {"input_ids": ids, "decoder_input_ids": ids[:, :3].clone(), "use_cache": True}
        if self.kind == "encoder":
            return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        return {"input_ids": ids, "use_cache": True}


def _llama_like(name, cfg, mdl, attention, **over):
    return Arch(name, cfg, mdl, {**COMMON, **over}, attention_class=attention)


ARCHS: dict[str, Arch] = {a.name: a for a in [
    _llama_like("llama", "LlamaConfig", "LlamaForCausalLM", "LlamaAttention"),
    _llama_like("qwen2", "Qwen2Config", "Qwen2ForCausalLM", "Qwen2Attention"),
    _llama_like("qwen3", "Qwen3Config", "Qwen3ForCausalLM", "Qwen3Attention"),
    _llama_like("qwen3_moe", "Qwen3MoeConfig", "Qwen3MoeForCausalLM", "Qwen3MoeAttention",
                num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, decoder_sparse_step=1),
    _llama_like("mistral", "MistralConfig", "MistralForCausalLM", "MistralAttention", sliding_window=WINDOW),
    _llama_like("mixtral", "MixtralConfig", "MixtralForCausalLM", "MixtralAttention", num_local_experts=4,
                num_experts_per_tok=2),
    _llama_like("gemma2", "Gemma2Config", "Gemma2ForCausalLM", "Gemma2Attention", sliding_window=WINDOW),
    _llama_like("gemma3", "Gemma3TextConfig", "Gemma3ForCausalLM", "Gemma3Attention", sliding_window=WINDOW,
                layer_types=["sliding_attention", "full_attention"]),
    Arch("phi3", "Phi3Config", "Phi3ForCausalLM",
         {**{k: v for k, v in COMMON.items() if k != "head_dim"}, "original_max_position_embeddings": 64},
         attention_class="Phi3Attention"),
    Arch("gpt2", "GPT2Config", "GPT2LMHeadModel",
         dict(vocab_size=VOCAB, n_positions=64, n_embd=HIDDEN, n_layer=2, n_head=HEADS, bos_token_id=1,
              eos_token_id=2), kv_heads=HEADS, attention_class="GPT2Attention"),
    Arch("gpt_neox", "GPTNeoXConfig", "GPTNeoXForCausalLM",
         dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=2,
              num_attention_heads=HEADS, max_position_embeddings=64, rotary_pct=0.5),
         kv_heads=HEADS, attention_class="GPTNeoXAttention"),
    Arch("falcon", "FalconConfig", "FalconForCausalLM",
         dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=HEADS,
              multi_query=True, new_decoder_architecture=False, parallel_attn=True, bias=False),
         kv_heads=1, attention_class="FalconAttention"),
    Arch("deepseek_v3", "DeepseekV3Config", "DeepseekV3ForCausalLM",
         dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN, moe_intermediate_size=16,
              num_hidden_layers=2, num_attention_heads=HEADS, num_key_value_heads=HEADS, n_routed_experts=4,
              n_shared_experts=1, num_experts_per_tok=2, n_group=1, topk_group=1, first_k_dense_replace=1,
              kv_lora_rank=16, q_lora_rank=None, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8,
              max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2),
         kv_heads=HEADS, head_dim=None, attention_class="DeepseekV3Attention"),
    Arch("bert", "BertConfig", "BertForMaskedLM",
         dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=2,
              num_attention_heads=HEADS, max_position_embeddings=64), kind="encoder", kv_heads=None,
         attention_class="BertSelfAttention"),
    Arch("bart", "BartConfig", "BartForConditionalGeneration",
         dict(vocab_size=VOCAB, d_model=HIDDEN, encoder_layers=1, decoder_layers=1, encoder_attention_heads=HEADS,
              decoder_attention_heads=HEADS, encoder_ffn_dim=FFN, decoder_ffn_dim=FFN, max_position_embeddings=64,
              pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=2),
         kind="seq2seq", kv_heads=HEADS, attention_class="BartAttention"),
    Arch("mamba", "MambaConfig", "MambaForCausalLM",
         dict(vocab_size=VOCAB, hidden_size=HIDDEN, state_size=8, num_hidden_layers=2, conv_kernel=4, expand=2,
              pad_token_id=0, bos_token_id=1, eos_token_id=2), kind="ssm", kv_heads=None, head_dim=None,
         attention_class="MambaMixer"),
    Arch("jamba", "JambaConfig", "JambaForCausalLM",
         dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=2,
              num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, attn_layer_period=2, attn_layer_offset=1,
              expert_layer_period=2, expert_layer_offset=1, num_experts=2, num_experts_per_tok=1,
              mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, mamba_dt_rank=4, use_mamba_kernels=False,
              max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2),
         kind="hybrid", attention_class="JambaAttention"),
]}
