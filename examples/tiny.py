"""Shared pieces of the examples: an offline tokenizer and a tiny random Llama.

Usage::

    from tiny import build_tokenizer, build_model
    tokenizer = build_tokenizer()             # a real PreTrainedTokenizerFast, built in code
    model = build_model(seed=0, tokenizer=tokenizer)  # LlamaForCausalLM, GQA: 4 query heads share 2 kv heads

Nothing is downloaded: the tokenizer is a byte-level BPE trained in a fraction of a second on the
sentences in ``CORPUS``, and the model is built from a ``LlamaConfig`` with random weights. Both are
deterministic: the same text gives the same ids, the same seed gives the same weights.
"""

from __future__ import annotations

import torch

__all__ = [
    "CORPUS",
    "SPECIAL_TOKENS",
    "MODEL_DIMS",
    "PROMPT",
    "build_tokenizer",
    "build_config",
    "build_model",
]

# A small built-in corpus of English sentences about transformers; the BPE merges are learnt from it.
CORPUS = [
    "Hello world, this is a tiny language model.",
    "The tokenizer turns text into input ids and an attention mask.",
    "A transformer stacks decoder layers of attention and a feed forward network.",
    "Each attention layer projects the hidden states into queries, keys and values.",
    "With grouped query attention, several query heads share one key value head.",
    "The key value cache stores past keys and values so generation does not recompute them.",
    "The model returns logits over the vocabulary for every position in the sequence.",
    "During training the loss compares the shifted logits with the labels.",
    "The optimizer updates the weights after the backward pass computes the gradients.",
    "A checkpoint saves the model state dict and the optimizer state dict.",
    "Debugging a model means stopping at a line and looking at real tensors.",
    "Shapes tell you the batch size, the number of heads, the sequence length and the head dimension.",
]

# (token, id): Llama's order for unk/bos/eos, then a pad token, which Llama lacks but batching needs.
SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<pad>"]

MODEL_DIMS = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=256,
)

PROMPT = "Hello world"

_VOCAB_SIZE = 384  # 4 special tokens + 256 bytes + up to 124 merges (the corpus yields about that many)


def build_tokenizer():
    """Usage: ``tokenizer = build_tokenizer()``; a byte-level BPE ``PreTrainedTokenizerFast``, offline.

    ``tokenizer("Hello world", return_tensors="pt")`` gives a ``BatchEncoding`` with ``input_ids`` and
    ``attention_mask``; a ``<s>`` (bos) is prepended like Llama's tokenizer does. Special tokens:
    ``<unk>`` 0, ``<s>`` 1, ``</s>`` 2, ``<pad>`` 3. Training is deterministic (same merges every run).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE(unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=_VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(CORPUS, trainer=trainer)
    bos_id = backend.token_to_id("<s>")
    backend.post_processor = processors.TemplateProcessing(
        single="<s> $A",
        pair="<s> $A <s> $B:1",
        special_tokens=[("<s>", bos_id)],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        padding_side="left",  # decoder-only models generate from the right end
    )


def build_config(tokenizer):
    """Usage: ``config = build_config(tokenizer)``; the ``LlamaConfig`` of the tiny model (GQA 4/2)."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **MODEL_DIMS,
    )


def build_model(seed: int = 0, tokenizer=None):
    """Usage: ``model = build_model(seed=0, tokenizer=tokenizer)``; a random tiny ``LlamaForCausalLM`` (eval mode).

    4 query heads share 2 key/value heads (grouped-query attention), head_dim 16, hidden 64, 2 layers,
    vocab = ``len(tokenizer)``. ``torch.manual_seed(seed)`` runs first, so weights repeat exactly.
    Without a tokenizer, ``build_tokenizer()`` is called for the vocabulary and special ids.
    """
    from transformers import LlamaForCausalLM

    if tokenizer is None:
        tokenizer = build_tokenizer()
    config = build_config(tokenizer)
    torch.manual_seed(seed)
    return LlamaForCausalLM(config).eval()
