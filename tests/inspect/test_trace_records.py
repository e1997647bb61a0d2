"""Folding identical consecutive layers in trace rows, and the shape summaries the rows are made of."""

from __future__ import annotations

import torch

from llmpdb.inspect.shape_summary import named_tensor_leaves, shape_items, value_summary
from llmpdb.inspect.trace_records import TraceCall, collapse_calls, dtype_text


def layer(order: int, index: int, out: str = "(1, 7, 64)") -> list[TraceCall]:
    base = f"model.layers.{index}"
    return [TraceCall(order, base, "Block", 1, ("(1, 7, 64)",), (out,), "f32", "f32"),
            TraceCall(order + 1, base + ".mlp", "MLP", 2, ("(1, 7, 64)",), (out,), "f32", "f32")]


def test_equal_consecutive_layers_fold_and_a_different_one_does_not():
    calls = [TraceCall(0, "model", "Model", 0, ("(1, 7)",), ("(1, 7, 64)",), "i64", "f32")]
    calls += layer(1, 0) + layer(3, 1) + layer(5, 2) + layer(7, 3, out="(1, 7, 32)")
    rows = collapse_calls(calls)
    assert [(r.path, r.count) for r in rows] == [
        ("model", 1), ("model.layers.{0..2}", 3), ("model.layers.{0..2}.mlp", 3),
        ("model.layers.3", 1), ("model.layers.3.mlp", 1)]
    assert len(collapse_calls(calls, fold=False)) == len(calls)


def test_layers_that_are_not_consecutive_do_not_fold():
    calls = layer(0, 0) + layer(2, 2)
    assert [r.path for r in collapse_calls(calls)] == ["model.layers.0", "model.layers.0.mlp", "model.layers.2",
                                                        "model.layers.2.mlp"]


def test_dtype_text_and_shape_items():
    assert dtype_text("i64", "f32") == "i64 → f32"
    assert dtype_text("f32", "f32") == "f32"
    assert dtype_text(None, None) == "—"
    x = torch.zeros(1, 7, 64)
    items = shape_items((x, None, 3), {"position_embeddings": (x[..., :16], x[..., :16]), "cache": object()})
    assert items == ["(1, 7, 64)", "position_embeddings=((1, 7, 16), (1, 7, 16))"]
    assert shape_items((x, x, x, x, x), limit=3) == ["(1, 7, 64)"] * 3 + ["+2"]
    assert value_summary([x.to(torch.bfloat16)]) == "[(1, 7, 64) bf16]"
    assert [p for p, _ in named_tensor_leaves({"logits": x, "past": (x,)})] == ["output.logits", "output.past[0]"]
