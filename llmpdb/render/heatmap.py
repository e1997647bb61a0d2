"""Text of ``show``: a heatmap of a ``HeatGrid`` and the bars of a ``Histogram``.

Usage::

    print(render_heatmap(grid, "attn[0, 2]", style=Style(color=True)))
    print(render_histogram(hist, "x", width=80))

Plain text draws one character per cell from the ramp `` .:-=+*#%@`` (the minimum is a blank, anything
above it is not), ``x`` for -inf or the dtype's minimum (a mask, or an overflow), ``?`` for NaN, ``^``
for +inf; a bool tensor drawn one value per cell has a two-glyph legend (False, True). On a colour
terminal a cell is a 256-colour background block instead. Rows are labelled with the tensor rows each one
covers, the column axis with the first and last column index; a legend gives each glyph's
value range.
"""

from __future__ import annotations

import math

from ..inspect.heatmap import MASKED, NAN, POSINF, HeatGrid, Histogram
from ..units import format_number, format_shape, plural
from .style import Style, visible_len
from .table import ellipsize, fit_text

__all__ = ["RAMP", "render_heatmap", "render_histogram", "glyph_level"]

RAMP = " .:-=+*#%@"
_PALETTE = (17, 18, 19, 25, 31, 37, 43, 79, 191, 226)  # dark blue -> yellow, 256-colour backgrounds
_SPECIAL = {MASKED: ("x", "48;5;238;37"), NAN: ("?", "48;5;160;97"), POSINF: ("^", "48;5;201;97")}
# -inf or the dtype's minimum is how attention masks mark what is not attended, and what an overflow gives
# too (fp16 past ±65504): the legend says what the value is, not why
_SPECIAL_TEXT = {MASKED: "-inf or the dtype's minimum", NAN: "NaN", POSINF: "+inf"}


def glyph_level(value: float, low: float, high: float, levels: int = len(RAMP)) -> int:
    """Usage: ``glyph_level(0.5, 0, 1)`` -> 5; 0 only for the minimum, ``levels - 1`` for a constant grid."""
    if high <= low:
        return levels - 1
    if value <= low:
        return 0
    return max(1, min(levels - 1, math.ceil((value - low) / (high - low) * (levels - 1) - 1e-9)))


def _cell(value, low, high, style: Style) -> str:
    if isinstance(value, str):
        char, code = _SPECIAL[value]
        return f"\x1b[{code}m{char}\x1b[0m" if style.color else char
    level = glyph_level(value, low, high)
    return f"\x1b[48;5;{_PALETTE[level]}m \x1b[0m" if style.color else RAMP[level]


def _span(edges: tuple[int, ...], i: int) -> str:
    first, last = edges[i], edges[i + 1] - 1
    return str(first) if first == last else f"{first}-{last}"


def _bool_cells(grid: HeatGrid) -> bool:
    """A bool tensor drawn one value per cell: every cell is False (0) or True (1)."""
    return grid.dtype == "bool" and all(v in (0, 1) for row in grid.cells for v in row if not isinstance(v, str))


def _legend(grid: HeatGrid, style: Style) -> list[str]:
    low, high = grid.low, grid.high
    items: list[str] = []
    if low is not None and _bool_cells(grid):
        for value, text in ((0, "False"), (1, "True")):
            if low <= value <= high:
                glyph = (_cell(value, 0, 1, style) if style.color else f"'{RAMP[-1] if value else RAMP[0]}'")
                items.append(f"{glyph} {text}")
    elif low is not None:
        if high <= low:
            glyph = _cell(low, low, high, style) if style.color else f"'{RAMP[-1]}'"
            items.append(f"{glyph} = {format_number(low)} (every value)")
        else:
            for level in range(len(RAMP)):
                sample = low if level == 0 else low + (high - low) * level / (len(RAMP) - 1)
                glyph = _cell(sample, low, high, style) if style.color else f"'{RAMP[level]}'"
                if level == 0:
                    items.append(f"{glyph} {format_number(low)}")
                else:
                    items.append(f"{glyph} ≤{format_number(sample)}")
    for kind, count in ((MASKED, grid.masked), (NAN, grid.nan), (POSINF, grid.posinf)):
        if count:
            glyph = _cell(kind, 0, 0, style) if style.color else f"'{_SPECIAL[kind][0]}'"
            items.append(f"{glyph} {_SPECIAL_TEXT[kind]} ({count})")
    return items


def _wrap(prefix: str, items: list[str], width: int) -> list[str]:
    lines, line = [], prefix
    for item in items:
        piece = item if line == prefix else "  " + item
        if visible_len(line) + visible_len(piece) > width and line != prefix:
            lines.append(line)
            line, piece = " " * len(prefix), item
        line += piece
    lines.append(line)
    return lines


def render_heatmap(grid: HeatGrid, expr: str, *, width: int = 100, style: Style | None = None) -> str:
    """Usage: ``render_heatmap(heat_grid(m, rows=30, cols=80), "m")``; header, axis, rows, legend."""
    style = style or Style()
    h, w = grid.shape
    r, c = len(grid.row_edges) - 1, len(grid.col_edges) - 1
    block_r, block_c = math.ceil(h / r), math.ceil(w / c)
    values = "no finite values" if grid.low is None else f"values {format_number(grid.low)} … {format_number(grid.high)}"
    if grid.dtype == "bool" and grid.low is not None:
        values = "share of True per cell" if not _bool_cells(grid) else "values False/True"
    scale = ("one cell per value" if (block_r, block_c) == (1, 1)
             else f"each cell the mean of up to {block_r}×{block_c} values")
    expr = ellipsize(expr, max(12, width // 2))
    head = f"{expr}  {grid.dtype} {format_shape((h, w))}  {values}  ({scale})"
    if len(head) > width:
        head = "\n".join(fit_text(f"{expr}  {grid.dtype} {format_shape((h, w))}  {values}", width)
                         + fit_text(f"({scale})", width))
    labels = [_span(grid.row_edges, i) for i in range(r)]
    pad = max(len(label) for label in labels)
    first, last = str(grid.col_edges[0]), str(grid.col_edges[-1] - 1)
    axis = first + " " * max(1, c - len(first) - len(last)) + last if c > len(first) + len(last) else first
    lines = [style.header(line) if style.color else line for line in head.split("\n")]
    lines.append(" " * (pad + 1) + axis)
    for label, row in zip(labels, grid.cells):
        lines.append(f"{label:>{pad}}|" + "".join(_cell(v, grid.low, grid.high, style) for v in row) + "|")
    lines.extend(_wrap("legend: ", _legend(grid, style), width))
    return "\n".join(lines)


def render_histogram(hist: Histogram, expr: str, *, width: int = 100, style: Style | None = None) -> str:
    """Usage: ``render_histogram(value_histogram(x, bins=10), "x")``; one bar per bin, scaled to the width."""
    style = style or Style()
    specials = [f"{_SPECIAL_TEXT[k]} {n}" for k, n in ((MASKED, hist.masked), (NAN, hist.nan), (POSINF, hist.posinf))
                if n]
    extra = f"; not counted: {', '.join(specials)}" if specials else ""
    head = (f"{ellipsize(expr, max(12, width // 2))}  {hist.dtype} {format_shape(hist.shape)}  "
            f"{plural(hist.total, 'finite value')} in {plural(len(hist.counts), 'bin')}{extra}")
    lines = [style.header(h) if style.color else h for h in fit_text(head, width)]
    if not hist.counts:
        lines.append("(no finite values to count)")
        return "\n".join(lines)
    last = len(hist.counts) - 1
    labels = [f"[{format_number(hist.edges[i])}, {format_number(hist.edges[i + 1])}{']' if i == last else ')'}"
              for i in range(len(hist.counts))]
    if len(hist.edges) == 2 and hist.edges[0] == hist.edges[1]:
        labels = [f"= {format_number(hist.edges[0])}"]
    label_w = max(len(label) for label in labels)
    count_w = max(len(str(n)) for n in hist.counts)
    room = max(1, width - label_w - count_w - 4)
    top = max(hist.counts) or 1
    bar = "█" if style.color else "#"
    for label, n in zip(labels, hist.counts):
        length = round(n / top * room)
        if n and not length:
            length = 1
        lines.append(f"{label:<{label_w}}  {n:>{count_w}}  {bar * length}".rstrip())
    return "\n".join(lines)
