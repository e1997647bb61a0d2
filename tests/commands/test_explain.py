"""`explain` under a real llmpdb debugger: a tiny Llama whose attention skips repeat_kv (post-mortem and at
a catch stop), a plain PyTorch Linear mismatch, view/cat/broadcast mismatches, explain EXPR at a stop, and
the one-line answers when there is nothing to explain."""

from __future__ import annotations

import importlib
import linecache
import os
import sys

import torch
from explain_models import LinearMismatch, broken_gqa_llama
from transcript import debug_transcript, outputs_of

import llmpdb
from tiny_models import tiny_llama

IDS = torch.ones(1, 7, dtype=torch.long)


def run_post_mortem(model, *args, **kwargs):
    try:
        model(*args, **kwargs)
    except RuntimeError:
        llmpdb.post_mortem()


def _gqa_sizes(model):
    config = model.config
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    head_dim = config.hidden_size // heads
    return heads, kv_heads, head_dim


def _assert_gqa_explained(text, model):
    heads, kv_heads, head_dim = _gqa_sizes(model)
    lines = text.splitlines()
    assert lines[0].startswith("RuntimeError: The size of tensor a")
    assert lines[1] == "  dimension 1"  # 100 columns: the exception wraps, its continuation indented
    assert lines[2] == "matmul (@): query_states @ key_states.transpose(2, 3)"  # and the place goes below
    assert lines[3].startswith("  at explain_models.py:") and lines[3].endswith(" in skip_repeat_kv_forward")
    query = next(line for line in lines if line.strip().startswith("query_states "))
    key = next(line for line in lines if line.strip().startswith("key_states.transpose(2, 3) "))
    assert f"({1}, {heads}, {7}, {head_dim})  batch · heads · seq · head_dim" in query
    assert f"({1}, {kv_heads}, {head_dim}, {7})  batch · kv_heads · head_dim · seq" in key
    chain = "(Linear) → view → transpose → apply_rotary_pos_emb"
    assert f"    from model.layers.0.self_attn.q_proj {chain}" == lines[lines.index(query) + 1]
    assert f"    from model.layers.0.self_attn.k_proj {chain}" == lines[lines.index(key) + 1]
    assert (f"  mismatch: dim 1: {heads} heads vs {kv_heads} kv_heads "
            "(batch dims broadcast (aligned from the right))") in lines
    assert lines[-1] == "  hint: GQA not expanded: repeat_kv missing?"


def test_post_mortem_explains_gqa_without_repeat_kv():
    model = broken_gqa_llama()
    out = outputs_of(debug_transcript(run_post_mortem, ["c", "explain", "c"], model, IDS))
    _assert_gqa_explained(out[0], model)


def test_catch_stop_explains_the_raising_line_before_any_handler():
    model = broken_gqa_llama()
    seen = []

    def handled():
        try:
            model(IDS)
        except RuntimeError as exc:
            seen.append(str(exc))

    out = debug_transcript(handled, ["catch RuntimeError", "c", "explain", "uncatch all", "c"])
    explained = out.split("(llmpdb) ")[3]
    _assert_gqa_explained(explained.rstrip("\n"), model)
    assert len(seen) == 1  # the program's handler ran afterwards, once


def test_linear_mismatch_is_explained_at_the_callers_line():
    model = LinearMismatch()
    x = torch.ones(2, 8)
    out = outputs_of(debug_transcript(run_post_mortem, ["c", "explain", "c"], model, x))
    lines = out[0].splitlines()
    assert lines[0] == "RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x16 and 32x4)"
    assert lines[1].startswith("Linear call: self.fc2(h)   at explain_models.py:")
    assert lines[2].startswith("  (raised inside linear.py:") and lines[2].endswith("(forward), called from here)")
    h = model.fc1.out_features
    assert lines[3].split() == ["h", "(2,", f"{h})"]
    assert lines[4] == "    from fc1 (Linear) → relu"
    assert lines[5].split() == ["self.fc2.weight", f"({model.fc2.out_features},", f"{model.fc2.in_features})",
                                "Parameter", "f32"]
    assert lines[6] == "    from fc2 (Linear)"
    assert lines[7] == f"  mismatch: dim 1: {h} vs {model.fc2.in_features} (input's last dim vs the weight's in_features)"
    assert lines[8] == f"  hint: fc2 (Linear) expects in_features {model.fc2.in_features}; the input's last dim is {h}"


def test_broadcast_mismatch_in_llama_rmsnorm_names_the_module_parameter():
    model = tiny_llama()
    wrong = torch.zeros(1, 3, 48)  # hidden_size is 64
    out = outputs_of(debug_transcript(run_post_mortem, ["c", "explain", "c"], model, inputs_embeds=wrong, width=160))
    lines = out[0].splitlines()
    assert lines[1].startswith("elementwise *: self.weight * hidden_states.to(input_dtype)   at modeling_llama.py:")
    assert lines[2].split()[:2] == ["self.weight", "(64,)"]
    assert lines[3] == "    from model.layers.0.input_layernorm.weight (LlamaRMSNorm)"
    assert lines[4].split()[:4] == ["hidden_states.to(input_dtype)", "(1,", "3,", "48)"]
    assert lines[5] == "    from argument hidden_states of forward → to → * torch.rsqrt(variance + self.variance_epsilon)"
    assert lines[6] == ("  mismatch: self.weight dim 0 (64 hidden) vs hidden_states.to(input_dtype) dim 2 (48) "
                        "(broadcast (aligned from the right))")


def view_and_cat(kind):
    x = torch.zeros(3, 4)
    y = torch.zeros(5, 4)
    if kind == "view":
        return x.view(2, 5)
    return torch.cat([x, y], dim=1)


def test_view_and_cat_mismatches():
    view = outputs_of(debug_transcript(run_post_mortem, ["c", "explain", "c"], view_and_cat, "view"))[0]
    assert "view: x.view(2, 5)" in view
    assert "  mismatch: x (3, 4): 12 elements do not fit (2, 5) = 10" in view.splitlines()
    cat = outputs_of(debug_transcript(run_post_mortem, ["c", "explain", "c"], view_and_cat, "cat"))[0]
    assert "cat: torch.cat([x, y], dim=1)" in cat
    assert "  mismatch: dim 0: 3 vs 5 (every dim but the cat dim (1) must match)" in cat.splitlines()


class Lazy:
    """A property that records being read: explain must never call it."""

    reads = 0

    @property
    def scores(self):
        Lazy.reads += 1
        return torch.zeros(2, 2)


def at_a_stop():
    q = torch.zeros(1, 4, 7, 16)
    k = q.transpose(2, 3).contiguous()
    lazy = Lazy()
    count = 3
    breakpoint()
    return q, k, lazy, count


def test_explain_expression_at_a_stop_runs_no_user_code():
    commands = ["c", "explain q @ k", "explain lazy.scores @ q", "explain count + 1", "explain", "explain nothing",
                "explain q @", "c"]
    out = outputs_of(debug_transcript(at_a_stop, commands))
    ok = out[0].splitlines()
    assert ok[0].startswith("matmul (@): q @ k   at test_explain.py:")
    assert ok[1].split() == ["q", "(1,", "4,", "7,", "16)"]
    assert ok[2].startswith("    from torch.zeros(1, 4, 7, 16)")
    assert ok[4] == "    from torch.zeros(1, 4, 7, 16) → transpose → contiguous"  # through k = q.transpose(...)
    assert len(ok) == 5  # no mismatch: (1, 4, 7, 16) @ (1, 4, 16, 7) is fine and no exception is in sight
    lazy = out[1].splitlines()
    assert lazy[1].split()[:2] == ["lazy.scores", "?"] and "not read (would run code)" in lazy[1]
    assert Lazy.reads == 0
    assert out[2].splitlines()[-1] == "  no tensor operand in count + 1 (found count: int, 1: int)"
    assert out[3] == ("*** explain: no exception in sight (explain works post-mortem, at a catch stop or inside an "
                      "except block); explain EXPR explains an expression here")
    assert out[4].splitlines()[-1].startswith("  nothing is not defined in at_a_stop (test_explain.py:")
    assert out[5].startswith("*** explain: invalid expression 'q @': ")


def test_no_source_says_so_in_one_line(tmp_path):
    path = tmp_path / "vanishing_mod.py"
    path.write_text("def boom(a, b):\n    return a @ b\n")
    sys.path.insert(0, str(tmp_path))
    try:
        module = importlib.import_module("vanishing_mod")
        os.remove(path)
        linecache.clearcache()
        out = outputs_of(debug_transcript(run_post_mortem, ["c", "explain", "c"], module.boom,
                                          torch.zeros(2, 3), torch.zeros(4, 5)))
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("vanishing_mod", None)
    lines = out[0].splitlines()
    assert lines[0].startswith("RuntimeError: mat1 and mat2 shapes cannot be multiplied")
    assert " ".join(line.strip() for line in lines[1:]) == f"no source for {path}:2: cannot parse the failing line"
    assert all(len(line) <= 100 for line in lines)  # a long path wraps, indented


def test_catch_stop_inside_torch_explains_the_callers_line():
    model = LinearMismatch()

    def handled():
        try:
            model(torch.ones(2, 8))
        except RuntimeError:
            pass

    out = debug_transcript(handled, ["catch RuntimeError", "c", "explain", "uncatch all", "c"])
    lines = out.split("(llmpdb) ")[3].splitlines()
    assert lines[0] == "RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x16 and 32x4)"
    assert lines[1].startswith("Linear call: self.fc2(h)   at explain_models.py:")
    assert lines[2].startswith("  (raised inside linear.py:")
    assert "  mismatch: dim 1: 16 vs 32 (input's last dim vs the weight's in_features)" in lines


class Spy:
    """Records every attribute it is asked for (``__getattr__`` and ``__getattribute__``)."""

    asked: list[str] = []

    def __getattribute__(self, name):
        Spy.asked.append(name)
        return object.__getattribute__(self, name)

    def __getattr__(self, name):
        Spy.asked.append(name)
        raise AttributeError(name)


def hostile_stop():
    from unittest import mock

    spy, fake = Spy(), mock.MagicMock()
    q = torch.zeros(2, 3)
    breakpoint()
    return spy, fake, q


def test_hostile_locals_are_asked_nothing():
    from unittest import mock

    Spy.asked.clear()
    out = outputs_of(debug_transcript(hostile_stop, ["c", "explain spy.scores @ q", "explain fake.weight + q",
                                                     "explain torch.cat([spy, fake.x, q[0]])", "c"]))
    assert Spy.asked == []
    assert all("internal error" not in chunk for chunk in out), out
    assert "spy.scores" in out[0] and "not read (would run code)" in out[0]
    assert "fake.weight" in out[1]
    assert "q[0]" in out[2] and "(3,)" in out[2]
    assert isinstance(mock.MagicMock(), mock.MagicMock)


def breakpoint_in_except(model, x):
    try:
        model(x)
    except RuntimeError:
        breakpoint()  # pdb stops at the next line: still inside the except block
        x = None
    return x


def test_breakpoint_inside_an_except_block_explains_the_handled_exception():
    out = outputs_of(debug_transcript(breakpoint_in_except, ["c", "explain", "c"], LinearMismatch(), torch.ones(2, 8)))
    lines = out[0].splitlines()
    assert lines[0] == "RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x16 and 32x4)"
    assert lines[1].startswith("Linear call: self.fc2(h)   at explain_models.py:")
