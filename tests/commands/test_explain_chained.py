"""`explain` follows the exception chain: a wrapper's ``raise ... from e`` (or an exception raised while
handling another) around a real shape error in a tiny Llama explains that error and says so; ``from None``
hides the chain and is respected."""

from __future__ import annotations

import torch
from explain_models import broken_gqa_llama
from transcript import explained


IDS = torch.ones(1, 7, dtype=torch.long)


def wrapped(model, how):
    try:
        return model(IDS)
    except RuntimeError as exc:
        if how == "from":
            raise ValueError("forward failed") from exc
        if how == "none":
            raise ValueError("forward failed") from None
        raise ValueError("forward failed")


def _assert_gqa(lines, model):
    heads, kv_heads = model.config.num_attention_heads, model.config.num_key_value_heads
    assert lines[2].startswith("matmul (@): query_states @ key_states.transpose(2, 3)   at explain_models.py:")
    assert f"  mismatch: dim 1: {heads} heads vs {kv_heads} kv_heads (batch dims broadcast (aligned from the right))" \
        in lines
    assert lines[-1] == "  hint: GQA not expanded: repeat_kv missing?"


def test_raise_from_explains_the_cause():
    model = broken_gqa_llama()
    lines = explained(wrapped, model, "from").splitlines()
    assert lines[0] == "ValueError: forward failed"
    assert lines[1].startswith("explaining the cause: RuntimeError: The size of tensor a (4) must match")
    _assert_gqa(lines, model)


def test_raised_while_handling_explains_the_handled_exception():
    model = broken_gqa_llama()
    lines = explained(wrapped, model, "context").splitlines()
    assert lines[0] == "ValueError: forward failed"
    assert lines[1].startswith("explaining the exception it was raised while handling: RuntimeError: The size")
    _assert_gqa(lines, model)


def test_from_none_is_not_followed():
    lines = explained(wrapped, broken_gqa_llama(), "none").splitlines()
    assert lines[0] == "ValueError: forward failed"
    assert not any("explaining" in line or "mismatch" in line for line in lines)
    assert lines[-1].endswith("is no call or operator: nothing to explain")
