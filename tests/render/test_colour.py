"""Colour in rendered text: the shapes table coloured after fitting, pygments source lines."""

from __future__ import annotations

import re

import pytest
import torch

from llmpdb.inspect.tensors import frame_tensors
from llmpdb.render.source import highlight_line, highlight_lines
from llmpdb.render.style import Style, color_code, strip_ansi, visible_len
from llmpdb.render.tensors import render_tensors
from tiny_models import tiny_llama

SGR = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def walk():
    model = tiny_llama()
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    with torch.no_grad():
        outputs = model(input_ids=ids)
    weight = torch.zeros(4, 6).t()  # non-contiguous: a flags column
    return frame_tensors({"model": model, "ids": ids, "outputs": outputs, "weight": weight})


@pytest.mark.parametrize("width", [40, 60, 100, 160])
def test_colour_never_changes_the_layout(walk, width):
    plain = render_tensors(walk, width=width, style=Style(False))
    coloured = render_tensors(walk, width=width, style=Style(True))
    assert not SGR.search(plain)
    assert strip_ansi(coloured) == plain
    assert max(visible_len(line) for line in coloured.splitlines()) == max(len(l) for l in plain.splitlines())


def test_dtype_device_flag_cells_coloured(walk):
    style = Style(True, {"dtype": "blue"})
    lines = render_tensors(walk, width=160, style=style).splitlines()
    header = strip_ansi(lines[0]).split()
    assert "flags" in header
    ids_row = next(line for line in lines if strip_ansi(line).startswith("ids "))
    assert "\x1b[34mi64\x1b[0m" in ids_row  # the palette's colour, not the default green
    weight_row = next(line for line in lines if strip_ansi(line).startswith("weight "))
    assert f"\x1b[{style.code('flag')}mnon-contiguous\x1b[0m" in weight_row
    assert f"\x1b[{style.code('path')}mweight\x1b[0m" in weight_row


def test_color_names():
    assert color_code("bold red") == "1;31" and color_code("bright_cyan") == "96" and color_code("default") == ""
    assert color_code("purple") is None and color_code("") is None


def test_source_highlight_keeps_lines_and_never_recolours():
    lines = ['def f(x):\n', '    """doc\n', '    more"""\n', '    return x  # note\n']
    out = highlight_lines(lines)
    assert len(out) == 4 and all(SGR.search(line) for line in out)
    assert [strip_ansi(line) for line in out] == lines
    assert highlight_lines(out) == out  # already coloured: untouched
    single = highlight_line("y = f(1)")
    assert strip_ansi(single) == "y = f(1)" and "\n" not in single
