"""render.heatmap: plain glyphs and levels, colour blocks that still fit the width, the legend, bars."""

from __future__ import annotations

import torch

from llmpdb.inspect.heatmap import heat_grid, value_histogram
from llmpdb.render.heatmap import RAMP, glyph_level, render_heatmap, render_histogram
from llmpdb.render.style import Style, strip_ansi, visible_len


def test_glyph_levels():
    assert glyph_level(0, 0, 1) == 0
    assert glyph_level(1e-6, 0, 1) == 1  # anything above the minimum is visible
    assert glyph_level(1, 0, 1) == len(RAMP) - 1
    assert glyph_level(0.5, 0, 1) == 5
    assert glyph_level(3, 3, 3) == len(RAMP) - 1


def test_plain_heatmap_of_a_masked_triangle():
    mask = torch.full((3, 3), float("-inf")).triu(1)
    text = render_heatmap(heat_grid(mask, rows=10, cols=10), "m", width=100)
    assert text.splitlines() == [
        "m  f32 (3, 3)  values 0 … 0  (one cell per value)",
        "  0 2",
        "0|@xx|",
        "1|@@x|",
        "2|@@@|",
        "legend: '@' = 0 (every value)  'x' -inf or the dtype's minimum (3)",
    ]
    narrow = render_heatmap(heat_grid(mask, rows=10, cols=10), "m", width=40).splitlines()
    assert narrow[-2:] == ["legend: '@' = 0 (every value)", "        'x' -inf or the dtype's minimum (3)"]


def test_colour_heatmap_uses_background_blocks_and_fits():
    x = torch.arange(12.0).reshape(3, 4)
    x[0, 0] = float("nan")
    text = render_heatmap(heat_grid(x, rows=3, cols=4), "x", width=40, style=Style(color=True))
    assert "\x1b[48;5;" in text and "\x1b[48;5;160;97m?" in text
    for line in text.splitlines():
        assert visible_len(line) <= 40, strip_ansi(line)
    plain_rows = [strip_ansi(line) for line in text.splitlines() if strip_ansi(line).count("|") == 2]
    assert [len(r.split("|")[1]) for r in plain_rows] == [4, 4, 4]


def test_histogram_bars_scale_to_the_width():
    hist = value_histogram(torch.tensor([0.0, 1.0, 1.0, 1.0, 2.0]), bins=2)
    lines = render_histogram(hist, "v", width=30).splitlines()
    assert lines[:2] == ["v  f32 (5,)  5 finite values", "  in 2 bins"]  # the heading wraps to the width
    room = 30 - len("[0, 1)") - len("4") - 4
    assert lines[3] == "[1, 2]  4  " + "#" * room  # the fullest bin takes the room left
    assert lines[2] == "[0, 1)  1  " + "#" * round(room / 4)
    assert all(len(line) <= 30 for line in lines)


def test_a_bool_mask_has_a_two_glyph_legend_and_an_overflow_is_not_called_masked():
    mask = torch.tensor([[True, False, True, True], [False, False, True, True]])
    text = render_heatmap(heat_grid(mask, rows=10, cols=10), "mask", width=80)
    assert text.splitlines()[0] == "mask  bool (2, 4)  values False/True  (one cell per value)"
    assert text.splitlines()[-1] == "legend: ' ' False  '@' True"
    pooled = render_heatmap(heat_grid(torch.ones(4, 40, dtype=torch.bool).tril(), rows=2, cols=10), "m", width=80)
    assert "share of True per cell" in pooled.splitlines()[0]
    overflow = torch.tensor([[1.0, 70000.0, 2.0], [3.0, -70000.0, 4.0]]).half()  # fp16 overflows to ±inf
    text = render_heatmap(heat_grid(overflow, rows=10, cols=10), "h", width=80)
    assert "masked" not in text
    assert "'x' -inf or the dtype's minimum (1)" in text and "'^' +inf (1)" in text
    assert all(visible_len(line) <= 80 for line in text.splitlines())
