"""Every line of `explain` fits the terminal width (80 and 60 columns), headers included: the exception,
the chained cause, the expression and its place, notes and one-line problems wrap with indented
continuations, and no word of the exception is lost."""

from __future__ import annotations

import pytest
import torch
from explain_models import LinearMismatch, broken_gqa_llama
from transcript import debug_transcript, outputs_of

import llmpdb
from tiny_models import tiny_gpt2


def run_post_mortem(func, *args):
    try:
        func(*args)
    except Exception as exc:
        run_post_mortem.exception = f"{type(exc).__name__}: {exc}"
        llmpdb.post_mortem()


def wrapped_forward(model, ids):
    try:
        return model(ids)
    except RuntimeError as exc:
        raise ValueError("the forward pass of the attention layer failed for this batch of token ids") from exc


def no_source(a, b):
    namespace = {}
    exec(compile("def project(a, b):\n    return a @ b\n", "<a long generated name for code made by exec>", "exec"),
         namespace)
    return namespace["project"](a, b)


IDS = torch.ones(1, 7, dtype=torch.long)
CASES = {
    "gqa": lambda: (broken_gqa_llama(), IDS),
    "chained": lambda: (wrapped_forward, broken_gqa_llama(), IDS),
    "linear": lambda: (LinearMismatch(), torch.ones(2, 8)),
    "embedding": lambda: (tiny_gpt2(), torch.ones(1, 70, dtype=torch.long)),
    "no source": lambda: (no_source, torch.zeros(2, 3), torch.zeros(4, 5)),
}


@pytest.mark.parametrize("width", [80, 60])
@pytest.mark.parametrize("case", list(CASES))
def test_every_line_fits_the_width(case, width):
    func, *args = CASES[case]()
    text = outputs_of(debug_transcript(run_post_mortem, ["c", "explain", "c"], func, *args, width=width))[0]
    lines = text.splitlines()
    assert len(lines) >= 2
    too_long = [line for line in lines if len(line) > width]
    assert too_long == [], too_long
    exception = run_post_mortem.exception.split("\n")[0]
    assert " ".join(line.strip() for line in lines).startswith(exception)  # wrapped whole, never cut
    if len(exception) > width:
        assert lines[1].startswith("  ")  # its continuation is indented
    if case == "chained":
        assert any(line.startswith("explaining the cause: RuntimeError:") for line in lines)
