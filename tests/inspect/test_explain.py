"""``explain_traceback`` / ``explain_expression`` and ``provenance`` on real frames and tracebacks, and the
rendered view at a fixed width."""

from __future__ import annotations

import sys

import torch
from explain_models import broken_gqa_llama
from torch import nn

from llmpdb.inspect.explain import explain_expression, explain_traceback, is_internal
from llmpdb.render.explain import render_explanation


def _caught(fn, *args):
    try:
        fn(*args)
    except RuntimeError as exc:
        return exc
    raise AssertionError("no RuntimeError")


def test_gqa_records():
    model = broken_gqa_llama()
    exc = _caught(model, torch.ones(1, 7, dtype=torch.long))
    report = explain_traceback(exc.__traceback__, exc)
    q, k = report.operands
    assert (q.text, q.shape, k.text, k.shape) == ("query_states", (1, 4, 7, 16), "key_states.transpose(2, 3)",
                                                  (1, 2, 16, 7))
    assert q.provenance.module_path == "model.layers.0.self_attn.q_proj"
    assert q.provenance.module_class == "Linear"
    assert q.provenance.steps == ("view", "transpose", "apply_rotary_pos_emb")
    assert q.provenance.origin == "self.q_proj(hidden_states)"
    assert report.function == "skip_repeat_kv_forward" and report.notes == ()


class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 8)

    def forward(self, x, extra=None, scale=2):
        y = self.proj(x)
        if extra is not None:
            y = torch.cat([y, extra], dim=-1)
        if scale > 1:
            y = y * scale
        y += 1
        a, b = y.chunk(2, dim=-1)
        return a @ b


def test_provenance_follows_branches_that_ran_and_marks_those_that_may_not_have():
    exc = _caught(Branchy(), torch.ones(3, 4))
    report = explain_traceback(exc.__traceback__, exc)
    a, b = report.operands
    assert (a.shape, b.shape) == ((3, 4), (3, 4))
    assert a.provenance.module_path == "proj" and a.provenance.module_class == "Linear"
    # `extra` is None: the cat did not run; `scale > 1` cannot be told without running code: marked ?
    assert a.provenance.steps == ("* scale?", "+= 1", "chunk")
    exc = _caught(Branchy(), torch.ones(3, 4), torch.zeros(3, 0))
    a = explain_traceback(exc.__traceback__, exc).operands[0]
    assert a.provenance.steps == ("torch.cat", "* scale?", "+= 1", "chunk")
    assert report.diagnosis == "a dim 1 (4) vs b dim 0 (3) (contracted dims (last of a, second-to-last of b))"
    assert report.hint is None


def test_expression_at_a_frame_and_arguments():
    def f(hidden, n):
        w = torch.zeros(8, 5)
        frame = sys._getframe()
        return explain_expression(frame, "hidden @ w"), explain_expression(frame, "n * 2")

    both, scalar = f(torch.zeros(2, 4), 3)
    h, w = both.operands
    assert h.provenance.origin == "argument hidden of f" and w.provenance.origin == "torch.zeros(8, 5)"
    assert both.diagnosis == "hidden dim 1 (4) vs w dim 0 (8) (contracted dims (last of a, second-to-last of b))"
    assert scalar.problem == "no tensor operand in n * 2 (found n: int, 2: int)"


def test_internal_files():
    assert is_internal(torch.nn.modules.linear.__file__)
    assert is_internal(sys.modules["os"].__file__)
    assert not is_internal(__file__)


def test_rendered_at_width_80():
    model = broken_gqa_llama()
    exc = _caught(model, torch.ones(1, 7, dtype=torch.long))
    text = render_explanation(explain_traceback(exc.__traceback__, exc), width=80)
    lineno = explain_traceback(exc.__traceback__, exc).lineno
    assert text.splitlines() == [
        "RuntimeError: The size of tensor a (4) must match the size of tensor b (2) at",
        "  non-singleton dimension 1",
        "matmul (@): query_states @ key_states.transpose(2, 3)",
        f"  at explain_models.py:{lineno} in skip_repeat_kv_forward",
        "  query_states                (1, 4, 7, 16)  batch · heads · seq · head_dim",
        "    from model.layers.0.self_attn.q_proj (Linear) → view → transpose →",
        "         apply_rotary_pos_emb",
        "  key_states.transpose(2, 3)  (1, 2, 16, 7)  batch · kv_heads · head_dim · seq",
        "    from model.layers.0.self_attn.k_proj (Linear) → view → transpose →",
        "         apply_rotary_pos_emb",
        "  mismatch: dim 1: 4 heads vs 2 kv_heads (batch dims broadcast (aligned from the",
        "            right))",
        "  hint: GQA not expanded: repeat_kv missing?",
    ]


def test_a_comprehension_is_explained_in_its_function():
    def scores(xs):
        w = torch.zeros(5, 2)
        return [x @ w for x in xs]

    exc = _caught(scores, [torch.zeros(3, 4)])
    report = explain_traceback(exc.__traceback__, exc)
    x, w = report.operands
    assert (report.expression, x.shape, w.shape) == ("x @ w", (3, 4), (5, 2))
    assert w.provenance.origin == "torch.zeros(5, 2)"
    assert report.diagnosis == "x dim 1 (4) vs w dim 0 (5) (contracted dims (last of a, second-to-last of b))"


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(6, 6) for _ in range(2)])
        self.head = nn.Linear(4, 3)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def test_a_module_held_in_a_local_names_the_last_one_that_ran():
    exc = _caught(Stack(), torch.ones(2, 6))
    report = explain_traceback(exc.__traceback__, exc)
    x, weight = report.operands
    assert report.op == "Linear call" and (x.shape, weight.shape) == ((2, 6), (3, 4))
    assert x.provenance.module_path == "blocks.1?"  # assigned in a loop: marked, though the loop did finish
    assert weight.provenance.module_path == "head"
    assert report.hint == "head (Linear) expects in_features 4; the input's last dim is 6"
