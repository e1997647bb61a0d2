"""Messages fit the width they are given (80 columns): the path line, ``help NAME``, ``where-forward``, trace's "armed" line; wrapped at spaces, never inside a shape
or a path. ``trace`` never cuts a shape (``(2, 1…4)`` for ``(2, 19, 64)``)."""

from __future__ import annotations

import re

import pytest
import torch
from tiny_models import tiny_llama
from transcript import debug_transcript

PROMPT = "(llmpdb) "


def run_model():
    model = tiny_llama()
    ids = torch.randint(0, 200, (2, 19))
    breakpoint()
    return model(ids, use_cache=False)


def _lines(out: str) -> list[str]:
    """Every printed line, the prompt (on a terminal, the line the user typed) taken off."""
    return [line.replace(PROMPT, "") for line in out.splitlines()]


@pytest.mark.parametrize("width", [80])
def test_messages_fit_the_width(width):
    commands = ["c", "kv", "help shapes", "help trace", "bm layers.0.self_attn", "c", "stack-model",
                "where-forward", "c", "trace", "c"]
    out = debug_transcript(run_model, commands, width=width)
    site = re.compile(r"^\s*\S*\.py[:(]")  # pdb's own location lines, and a file path alone on its line
    too_long = [line for line in _lines(out) if len(line) > width and not site.match(line)
                and not line.startswith("[")]  # errors too: wrapped onto indented lines
    assert too_long == []
    assert "path: eval, grad, no labels, no cache, attn sdpa" in out.replace("\n  ", " ")
    assert "kv: no KV cache in this frame" in out


@pytest.mark.parametrize("width", [80, 60])
def test_trace_never_cuts_a_shape(width):
    out = debug_transcript(run_model, ["c", "trace model(ids)", "c"], width=width)
    table = out.split(PROMPT)[2]
    assert not re.search(r"\([^)]*…", table), table
    assert "(2, 19, 64)" in table and "(2, 19, 256)" in table
