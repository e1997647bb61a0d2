"""Width-aware plain-text tables.

Usage::

    render_table(["path", "shape"], [["inputs['input_ids']", "(1, 7)"]], width=80, shrink=(0,))

Columns are padded to their widest cell and separated by two spaces; trailing spaces are dropped. When the
table is wider than ``width``, the columns listed in ``shrink`` lose characters from their middle (``…``)
until it fits or they reach ``min_width``. Cells may hold ANSI colour codes: widths count visible characters.
``right`` lists the columns aligned to the right (numbers).
"""

from __future__ import annotations

from collections.abc import Sequence

from .style import Style, strip_ansi, visible_len

__all__ = ["render_table", "ellipsize"]


def ellipsize(text: str, limit: int) -> str:
    """Usage: ``ellipsize("model.layers.10.self_attn", 12)`` -> ``"model…lf_attn"``-style middle cut."""
    if limit <= 0:
        return ""
    if visible_len(text) <= limit:
        return text
    plain = strip_ansi(text)
    if limit == 1:
        return "…"
    head = (limit - 1) // 2
    tail = limit - 1 - head
    return plain[:head] + "…" + (plain[-tail:] if tail else "")


def render_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    width: int = 100,
    shrink: Sequence[int] = (0,),
    right: Sequence[int] = (),
    min_width: int = 12,
    style: Style | None = None,
) -> str:
    """Render ``rows`` under ``headers``; returns the text without a trailing newline."""
    style = style or Style()
    ncols = len(headers)
    cells = [[str(c) for c in row] + [""] * (ncols - len(row)) for row in rows]
    widths = [max([visible_len(h)] + [visible_len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    gap = 2
    total = sum(widths) + gap * (ncols - 1)
    for i in shrink:
        if total <= width or i >= ncols:
            continue
        new = min(widths[i], max(min_width, widths[i] - (total - width), visible_len(headers[i])))
        total -= widths[i] - new
        widths[i] = new

    def line(values: Sequence[str], header: bool = False) -> str:
        parts = []
        for i, value in enumerate(values):
            value = ellipsize(value, widths[i])
            pad = " " * (widths[i] - visible_len(value))
            if header:
                value = style.header(value)
            parts.append(pad + value if i in right else value + pad)
        return "  ".join(parts).rstrip()

    out = [line(headers, header=True)]
    out.extend(line(r) for r in cells)
    return "\n".join(out)
