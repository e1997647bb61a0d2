"""`trace` under a real llmpdb debugger on a tiny Llama: the shape table, folding, the next-forward mode,
and hooks removed however the pass ends."""

from __future__ import annotations

import re

import pytest
import torch
from tiny_models import plain_model, tiny_llama
from transcript import debug_transcript, outputs_of


def run_model(model, poison=None):
    inputs = {"input_ids": torch.arange(3, 10).unsqueeze(0), "attention_mask": torch.ones(1, 7, dtype=torch.long)}
    breakpoint()
    try:
        out = model(**inputs)
    except BaseException as exc:  # the test's injected failure: the program goes on
        out = exc
    breakpoint()
    return out


def no_hooks_left(model) -> bool:
    return all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def first_cells(chunk: str) -> list[str]:
    return [re.split(r"\s{2,}", line.strip())[0] for line in chunk.splitlines()]


def table_rows(chunk: str, skip_head: int = 1) -> dict[str, str]:
    """Rows of the trace table by their module cell (indentation dropped), cells joined by one space."""
    return {re.split(r"\s{2,}", line.strip())[0]: " ".join(line.split())
            for line in chunk.splitlines()[skip_head:-2]}


def test_trace_expr_lists_embed_layers_norm_head_with_shapes_and_folds_layers():
    model = tiny_llama()
    chunks = outputs_of(debug_transcript(run_model, ["c", "trace model(**inputs)", "c", "c"], model, width=140))
    lines = chunks[0].splitlines()
    assert lines[0].split() == ["module", "class", "in", "out", "dtype"]
    rows = table_rows(chunks[0])
    assert rows["(root)"] == "(root) LlamaForCausalLM input_ids=(1, 7), +1 logits=(1, 7, 256) i64 → f32"
    assert rows[".embed_tokens"] == ".embed_tokens Embedding (1, 7) (1, 7, 64) i64 → f32"
    assert rows[".layers.{0..1} ×2"].startswith(".layers.{0..1} ×2 LlamaDecoderLayer (1, 7, 64)")
    assert rows[".k_proj"] == ".k_proj Linear (1, 7, 64) (1, 7, 32) f32"   # 2 kv heads × 16
    assert rows[".q_proj"] == ".q_proj Linear (1, 7, 64) (1, 7, 64) f32"
    assert rows[".norm"] == ".norm LlamaRMSNorm (1, 7, 64) (1, 7, 64) f32"
    assert rows["lm_head"] == "lm_head Linear (1, 7, 64) (1, 7, 256) f32"
    order = [c.strip() for c in first_cells(chunks[0])[1:-2]]
    assert order.index(".embed_tokens") < order.index(".layers.{0..1} ×2") < order.index(".norm") < order.index("lm_head")
    assert "layers.0" not in chunks[0]  # folded
    assert lines[-2] == "32 module calls in 19 rows (identical layers folded; --all lists each)"
    assert lines[-1] == "hooks see module calls only: a view/transpose/cat inside a forward is not a row"
    assert no_hooks_left(model)


def test_trace_fits_the_width_and_all_depth_list_each_layer():
    model = tiny_llama()
    chunks = outputs_of(debug_transcript(run_model, ["c", "trace model(**inputs)", "trace model(**inputs) --all --depth 3",
                                                     "c", "c"], model, width=80))
    assert max(len(line) for line in chunks[0].splitlines()) <= 80
    cells = [c.strip() for c in first_cells(chunks[1])]
    assert cells[1:9] == ["(root)", "model", ".embed_tokens", ".rotary_emb", ".layers.0", ".layers.1", ".norm", "lm_head"]
    assert chunks[1].splitlines()[-2] == "8 module calls"


def test_trace_pattern_arms_the_next_forward_and_prints_when_it_ends():
    model = tiny_llama()
    chunks = outputs_of(debug_transcript(run_model, ["c", "trace *self_attn", "c", "c"], model, width=120))
    assert chunks[0] == ("trace: armed on 2 modules of LlamaForCausalLM; the table prints when its next forward ends "
                         "(`trace off` to drop)")
    assert chunks[1].splitlines()[0] == "trace: the forward pass just ran"
    cells = [c.strip() for c in first_cells(chunks[1])]
    assert cells[2:3] == ["model.layers.{0..1}.self_attn ×2"]
    assert "lm_head" not in chunks[1]
    assert no_hooks_left(model)


def test_trace_off_and_bad_input():
    model = tiny_llama()
    chunks = outputs_of(debug_transcript(run_model, ["c", "trace", "trace off", "trace off", "trace bogus_name",
                                                     "trace --depth -1", "trace model(**inputs", "c", "c"], model))
    assert chunks[1] == "trace: disarmed (hooks removed)"
    assert chunks[2] == "trace: nothing armed"
    assert chunks[3].startswith("*** trace: no module matches 'bogus_name'")
    assert chunks[4].startswith("*** trace: bad value for --depth: '-1'")
    assert chunks[5].startswith("*** trace: cannot parse arguments: unclosed bracket")
    assert no_hooks_left(model)


def _raise_in_layer1(exc):
    def hook(module, args, output):
        raise exc
    return hook


@pytest.mark.parametrize("exc", [ValueError("boom in layer 1"), KeyboardInterrupt(), SystemExit(3)])
def test_trace_expr_removes_hooks_when_the_forward_raises(exc):
    model = tiny_llama()
    model.model.layers[1].mlp.register_forward_hook(_raise_in_layer1(exc))
    chunks = outputs_of(debug_transcript(run_model, ["c", "trace model(**inputs) --all", "c", "c"], model, width=140))
    assert f"*** trace: model(**inputs) raised {type(exc).__name__}" in chunks[0]
    assert ".layers.1" in chunks[0] and "lm_head" not in chunks[0]  # the rows recorded before the failure
    assert all(not m._forward_pre_hooks for m in model.modules())
    assert [len(m._forward_hooks) for m in model.modules()] == [1 if m is model.model.layers[1].mlp else 0
                                                               for m in model.modules()]


def test_next_forward_trace_interrupted_by_keyboard_interrupt_is_closed_at_the_next_stop():
    model = tiny_llama()
    model.model.layers[0].mlp.register_forward_hook(_raise_in_layer1(KeyboardInterrupt()))
    chunks = outputs_of(debug_transcript(run_model, ["c", "trace --all", "c", "c"], model, width=140))
    assert "trace: the forward pass just ran" in chunks[1].splitlines()  # said by the next stop
    assert "interrupted" in chunks[1] and ".layers.0" in chunks[1] and "lm_head" not in chunks[1]
    assert all(not m._forward_pre_hooks for m in model.modules())


def test_trace_on_a_plain_pytorch_model():
    model = plain_model()

    def run(model):
        ids = torch.arange(5).unsqueeze(0)
        breakpoint()
        return model(ids)

    chunks = outputs_of(debug_transcript(run, ["c", "trace model(ids)", "c"], model, width=120))
    rows = table_rows(chunks[0])
    assert rows["(root)"] == "(root) PlainLM (1, 5) (1, 5, 64), +1 i64 → f32"
    assert rows["blocks.{0..1} ×2"] == "blocks.{0..1} ×2 PlainAttention (1, 5, 32) (1, 5, 32), +1 f32"
    assert no_hooks_left(model)
