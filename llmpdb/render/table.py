"""Width-aware plain-text tables.

Usage::

    render_table(["path", "shape"], [["inputs['input_ids']", "(1, 7)"]], width=80, shrink=(0,))
    headers, rows, hidden = fit_columns(headers, rows, 80, [("cut", "path", 24), ("hide", "grad")])

Columns are padded to their widest cell and separated by two spaces; trailing spaces are dropped. When the
table is wider than ``width``, the columns listed in ``shrink`` lose characters from their middle (``…``)
until it fits or they reach ``min_width``. Cells may hold ANSI colour codes: widths count visible characters.
``right`` lists the columns aligned to the right (numbers).

``fit_columns`` is how every table of llmpdb fits its width: a fixed list of steps, each applied only while
the table is still too wide — ``("rewrite", column, function)`` rewrites every cell of a column
(``Backward0`` suffixes dropped), ``("cut", column, floor)`` cuts the column's cells in the middle down to
``floor`` characters (or to its header's length) with ``…`` (``("cut", column, floor, cutter)`` with a
cutter of one's own; two different cells never read the same: the ``…`` of those moves to where they
differ, at the same width, and only where no place tells them apart do they get more room),
``("rename", column, shorter)`` shortens a header, ``("hide", column)`` drops the column and reports it,
so the caller can say so below the table. A step naming a column the table does not have is skipped.
Shape columns are never in a step.
"""

from __future__ import annotations

from collections.abc import Sequence

from .style import Style, char_cells, strip_ansi, visible_len

__all__ = ["render_table", "ellipsize", "fit_columns", "table_width", "fit_text", "wrap_lines"]


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
    if plain.isascii():
        return plain[:head] + "…" + (plain[-tail:] if tail else "")
    return _cells_prefix(plain, head) + "…" + _cells_prefix(plain[::-1], tail)[::-1]


def _cells_prefix(text: str, cells: int) -> str:
    """The longest start of ``text`` that takes at most ``cells`` display cells."""
    used = 0
    for i, ch in enumerate(text):
        used += char_cells(ch)
        if used > cells:
            return text[:i]
    return text


def fit_text(text: str, width: int, indent: str = "  ") -> list[str]:
    """Usage: ``fit_text("a long note", 40)`` -> lines of at most ``width`` columns (plain text), continuation
    lines indented; a word longer than the width is broken."""
    import textwrap

    return textwrap.wrap(text, max(width, len(indent) + 8), subsequent_indent=indent,
                         break_on_hyphens=False) or [text]


def _protect(line: str) -> str:
    """Spaces inside a shape ``(2, 19, 64)`` / ``[2, 4]`` / a tensor's summary ``[(2, 19, 64) f32]`` become
    NUL, so a wrap never splits one (prose in parentheses still wraps)."""
    import re

    return re.sub(r"\[\([\d, ?…+]*\) \w+\]|[(\[][\d, ?…+]*[)\]]", lambda m: m.group(0).replace(" ", "\0"), line)


def wrap_lines(text: str, width: int) -> str:
    """Usage: ``wrap_lines(message, 80)``; each plain line wider than ``width`` wrapped at spaces, its
    continuation indented two more than the line; shapes (brackets) and long words (paths) are never split,
    so such a word alone may pass ``width``. Lines with colour codes are left as they are."""
    import textwrap

    out = []
    for line in text.split("\n"):
        if visible_len(line) <= width or "\x1b" in line:
            out.append(line)
            continue
        lead = line[: len(line) - len(line.lstrip())]
        wrapped = textwrap.wrap(_protect(line.strip()), max(width, len(lead) + 20), initial_indent=lead,
                                subsequent_indent=lead + "  ", break_long_words=False, break_on_hyphens=False)
        out.extend(part.replace("\0", " ") for part in wrapped or [line])
    return "\n".join(out)


def table_width(headers: Sequence[str], rows: Sequence[Sequence[str]], gap: int = 2) -> int:
    """Usage: ``table_width(headers, rows)``; the visible width of the widest line ``render_table`` makes."""
    widths = [max([visible_len(h)] + [visible_len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    return sum(widths) + gap * (len(headers) - 1)


def fit_columns(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int, steps: Sequence[tuple],
                gap: int = 2) -> tuple[list[str], list[list[str]], list[str]]:
    """Usage: ``fit_columns(headers, rows, 80, steps)`` -> ``(headers, rows, hidden column names)``.

    Applies ``steps`` in order, each only while the table is wider than ``width`` (see the module's
    docstring). Returns new lists; the inputs are not changed."""
    headers = list(headers)
    rows = [list(r) + [""] * (len(headers) - len(r)) for r in rows]
    hidden: list[str] = []
    for step in steps:
        if table_width(headers, rows, gap) <= width:
            break
        kind, name = step[0], step[1]
        if name not in headers:
            continue
        col = headers.index(name)
        if kind == "hide":
            del headers[col]
            for row in rows:
                del row[col]
            hidden.append(name)
        elif kind == "rewrite":
            for row in rows:
                row[col] = step[2](row[col])
        elif kind == "rename":
            headers[col] = step[2]
        elif kind == "cut":
            cutter = step[3] if len(step) > 3 else ellipsize
            current = max([visible_len(headers[col])] + [visible_len(r[col]) for r in rows])
            new = max(step[2], visible_len(headers[col]), current - (table_width(headers, rows, gap) - width))
            if new < current:
                cells = _distinct_cuts([row[col] for row in rows], new, cutter)
                for row, cell in zip(rows, cells):
                    row[col] = cell
    return headers, rows, hidden


def _distinct_cuts(cells: list[str], limit: int, cutter) -> list[str]:
    """``cells`` cut to ``limit``; where two different cells would read the same (``model.m…j.weight`` for
    layers 0 and 1), each of those is first cut elsewhere at the same length, the ``…`` moved to the
    place nearest the cutter's own where no other cell of the clash has that head and that tail
    (``model.layers.0…j.weight``), so the column keeps its width; only where no place tells a cell apart
    do those cells get more room, one character at a time. When some did, every cell is cut again to the
    column's new width (the room they took is the column's anyway)."""
    out = _distinct_at(cells, limit, cutter)
    wider = max((visible_len(cut) for cut in out), default=limit)
    if wider > limit:
        again = _distinct_at(cells, wider, cutter)
        if max(visible_len(cut) for cut in again) <= wider:
            return again
    return out


def _distinct_at(cells: list[str], limit: int, cutter) -> list[str]:
    out = [cutter(cell, limit) if visible_len(cell) > limit else cell for cell in cells]
    column = sorted(set(cells)) if len(set(cells)) <= _COLUMN_LIMIT else None
    room = limit
    while True:
        groups: dict[str, list[int]] = {}
        for i, cut in enumerate(out):
            groups.setdefault(cut, []).append(i)
        clashing = {cut: rows for cut, rows in groups.items() if len({cells[i] for i in rows}) > 1}
        if not clashing:
            return out
        moved = False
        for cut, rows in clashing.items():
            found = _moved_cuts(sorted({cells[i] for i in rows}), room, set(out) - {cut}, out[rows[0]], column)
            if found is not None:
                for i in rows:
                    out[i] = found[cells[i]]
                moved = True
        if moved:
            continue
        room += 1
        for rows in clashing.values():
            for i in rows:
                out[i] = cutter(cells[i], room) if visible_len(cells[i]) > room else cells[i]


_MOVED_LIMIT = 160  # cells in one clash tried one by one (pairs × places); a larger clash gets more room
_COLUMN_LIMIT = 400  # a column up to this many cells: a moved cut matches no other cell of the column


def _moved_cuts(cells: list[str], room: int, taken: set[str], usual: str,
                column: list[str] | None = None) -> dict[str, str] | None:
    """A middle cut of ``room`` characters for each of ``cells`` that no other cell matches (one with the
    same head and tail could be the one meant), of ``column`` when given, else of ``cells``, and that is
    none of ``taken``; the ``…`` nearest the cutter's own place (in ``usual``) first. None when some cell
    has no such cut, for text that is not plain ASCII (its characters are not its cells), or for a clash
    of more than ``_MOVED_LIMIT`` cells."""
    if room < 3 or len(cells) > _MOVED_LIMIT or not all(c.isascii() and "\x1b" not in c for c in cells):
        return None
    usual_head = usual.find("…")
    usual_head = (room - 1) // 2 if usual_head < 0 else usual_head
    heads = sorted(range(1, room - 1), key=lambda h: (abs(h - usual_head), h))
    found: dict[str, str] = {}
    for cell in cells:
        if len(cell) <= room:
            found[cell] = cell
            continue
        others = [c for c in (column or cells) if c != cell and len(c) > room]
        for head in heads:
            front, back = cell[:head], cell[len(cell) - (room - 1 - head):]
            cut = front + "…" + back
            if cut in taken or cut in found.values():
                continue
            if not any(o.startswith(front) and o.endswith(back) for o in others):
                found[cell] = cut
                break
        else:
            return None
    return found


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
