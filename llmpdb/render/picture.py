"""A tensor's values as a picture for a notebook: an inline SVG heatmap (or histogram) with a colour legend.

Usage::

    pic = Picture(grid, "attn[0, 2]", text)   # grid: a HeatGrid (or a Histogram); text: render_heatmap(...)
    pic                    # in Jupyter: the SVG (``_repr_html_``); a terminal REPL shows the one-line repr
    str(pic)               # the terminal rendering, as the ``show`` command prints it
    svg_heatmap(grid, "x") # the SVG alone

Every value drawn comes from the record (``inspect.heatmap``: block means, already on the CPU); the name
is escaped, so an expression such as ``x["<b>"]`` stays text. The picture is bounded: the grid it draws
has at most ``MAX_CELLS`` cells (the caller block-averages to fit), each cell at most 24 px. Finite values
map to a viridis-like scale from ``low`` to ``high`` (the legend's gradient, labelled with both); masked
(-inf or the dtype's minimum), NaN and +inf cells get colours of their own outside the scale, listed in
the legend with their counts. Each cell carries a tooltip (``<title>``): the tensor rows and columns it
covers and its value.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any

from ..inspect.heatmap import MASKED, NAN, POSINF, HeatGrid, Histogram

__all__ = ["Picture", "svg_heatmap", "svg_histogram", "scale_colour", "SPECIAL_COLOURS", "MAX_CELLS"]

MAX_CELLS = 64 * 64
# viridis at 0, 1/8, ..., 1: luminance rises monotonically from the first to the last
_ANCHORS = ((68, 1, 84), (70, 50, 126), (59, 82, 139), (44, 114, 142), (33, 145, 140), (40, 174, 128),
            (94, 201, 98), (170, 220, 50), (253, 231, 37))
SPECIAL_COLOURS = {MASKED: "#c8c8c8", NAN: "#ff00ff", POSINF: "#ff8c00"}
_SPECIAL_NAMES = {MASKED: "masked (-inf or the dtype's minimum)", NAN: "NaN", POSINF: "+inf"}
_FONT = 'font-family="monospace" font-size="11"'


def scale_colour(value: float, low: float | None, high: float | None) -> str:
    """Usage: ``scale_colour(0.5, 0.0, 1.0)`` -> ``"#21918c"``; ``low == high`` draws the middle colour."""
    if low is None or high is None or high <= low:
        t = 0.5
    else:
        t = min(1.0, max(0.0, (value - low) / (high - low)))
    pos = t * (len(_ANCHORS) - 1)
    i = min(int(pos), len(_ANCHORS) - 2)
    frac = pos - i
    a, b = _ANCHORS[i], _ANCHORS[i + 1]
    return "#" + "".join(f"{round(x + (y - x) * frac):02x}" for x, y in zip(a, b))


def _num(value: float) -> str:
    return f"{value:.4g}"


def _span(edges: tuple[int, ...], i: int) -> str:
    first, last = edges[i], edges[i + 1] - 1
    return str(first) if first == last else f"{first}-{last}"


def _legend(x: int, y: int, low: float | None, high: float | None, counts: dict[str, int]) -> list[str]:
    """The gradient bar labelled low … high, then one swatch per special kind present, with its count."""
    out = ['<defs><linearGradient id="llmpdb-scale">']
    for k in range(len(_ANCHORS)):
        t = k / (len(_ANCHORS) - 1)
        out.append(f'<stop offset="{t:.3f}" stop-color="{scale_colour(t, 0.0, 1.0)}"/>')
    out.append("</linearGradient></defs>")
    if low is not None and high is not None:
        out.append(f'<rect class="legend-scale" x="{x}" y="{y}" width="160" height="10" fill="url(#llmpdb-scale)"/>')
        out.append(f'<text x="{x}" y="{y + 22}" {_FONT}>{escape(_num(low))}</text>')
        out.append(f'<text x="{x + 160}" y="{y + 22}" text-anchor="end" {_FONT}>{escape(_num(high))}</text>')
        x += 175
    for kind in (MASKED, NAN, POSINF):
        if counts.get(kind):
            out.append(f'<rect class="legend-{kind.strip("+")}" x="{x}" y="{y}" width="10" height="10" '
                       f'fill="{SPECIAL_COLOURS[kind]}"/>')
            label = f"{_SPECIAL_NAMES[kind]} ({counts[kind]})"
            out.append(f'<text x="{x + 14}" y="{y + 9}" {_FONT}>{escape(label)}</text>')
            x += 24 + 7 * len(label)
    return out


def svg_heatmap(grid: HeatGrid, expr: str) -> str:
    """Usage: ``svg_heatmap(heat_grid(x, rows=64, cols=64), "x")``; one ``<rect class="cell">`` per grid cell."""
    rows, cols = len(grid.cells), len(grid.cells[0]) if grid.cells else 0
    if rows * cols > MAX_CELLS:
        raise ValueError(f"svg_heatmap: {rows}×{cols} cells, at most {MAX_CELLS}: block-average first")
    size = max(4, min(24, 640 // max(cols, 1), 480 // max(rows, 1)))
    left, top = 8, 22
    width, height = max(left + cols * size + 8, 420), top + rows * size + 44
    one_each = grid.shape == (rows, cols)
    title = (f"{expr}  {grid.dtype} ({grid.shape[0]}, {grid.shape[1]})  "
             + ("one cell per value" if one_each else f"cells: means of blocks, {rows}×{cols}"))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="llmpdb-heatmap" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}">',
           f'<text x="{left}" y="14" {_FONT}>{escape(title)}</text>']
    for r, line in enumerate(grid.cells):
        for c, value in enumerate(line):
            if isinstance(value, str):
                fill, kind, shown = SPECIAL_COLOURS[value], value.strip("+"), _SPECIAL_NAMES[value]
            else:
                fill, kind, shown = scale_colour(value, grid.low, grid.high), "value", _num(value)
            where = f"[{_span(grid.row_edges, r)}, {_span(grid.col_edges, c)}]"
            out.append(f'<rect class="cell {kind}" x="{left + c * size}" y="{top + r * size}" width="{size}" '
                       f'height="{size}" fill="{fill}"><title>{escape(expr + where)} = {escape(shown)}</title></rect>')
    counts = {MASKED: grid.masked, NAN: grid.nan, POSINF: grid.posinf}
    out += _legend(left, top + rows * size + 12, grid.low, grid.high, counts)
    out.append("</svg>")
    return "".join(out)


def svg_histogram(hist: Histogram, expr: str) -> str:
    """Usage: ``svg_histogram(value_histogram(x, bins=10), "x")``; one ``<rect class="bar">`` per bin."""
    bins = len(hist.counts)
    peak = max(hist.counts) if hist.counts else 0
    bar, plot_h, left, top = max(4, min(40, 480 // max(bins, 1))), 160, 8, 22
    width, height = max(left + bins * bar + 8, 420), top + plot_h + 44
    shape = ", ".join(str(s) for s in hist.shape)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="llmpdb-histogram" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}">',
           f'<text x="{left}" y="14" {_FONT}>{escape(f"{expr}  {hist.dtype} ({shape})  histogram, {bins} bins")}</text>']
    low, high = (hist.edges[0], hist.edges[-1]) if hist.edges else (None, None)
    for i, count in enumerate(hist.counts):
        h = 0 if not peak else round(plot_h * count / peak)
        mid = (hist.edges[i] + hist.edges[i + 1]) / 2
        span = f"[{_num(hist.edges[i])}, {_num(hist.edges[i + 1])}{']' if i == bins - 1 else ')'}"
        out.append(f'<rect class="bar" x="{left + i * bar}" y="{top + plot_h - h}" width="{max(1, bar - 1)}" '
                   f'height="{h}" fill="{scale_colour(mid, low, high)}"><title>{escape(span)}: {count}</title></rect>')
    counts = {MASKED: hist.masked, NAN: hist.nan, POSINF: hist.posinf}
    out += _legend(left, top + plot_h + 12, low, high, counts)
    out.append("</svg>")
    return "".join(out)


@dataclass(frozen=True)
class Picture:
    """What ``llmpdb.show`` returns: the record (``grid``: a HeatGrid or a Histogram), its terminal text,
    and an SVG for rich front ends (Jupyter calls ``_repr_html_``)."""

    record: Any
    expr: str
    text: str

    def _repr_html_(self) -> str:
        if type(self.record) is Histogram:
            return svg_histogram(self.record, self.expr)
        return svg_heatmap(self.record, self.expr)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        kind = "histogram" if type(self.record) is Histogram else "heatmap"
        shape = ", ".join(str(s) for s in self.record.shape)
        return f"<llmpdb.show {kind} of {self.expr} {self.record.dtype} ({shape}): str() for the text>"
