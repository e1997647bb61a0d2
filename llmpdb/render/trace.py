"""The ``trace`` table: one row per module call (or folded layers), shapes in → out, dtype changes.

Usage::

    render_trace(rows, width=100, calls=24, dropped=0, folded=True)

Columns: module path (indented by nesting; below its caller only the rest of the name, ``.q_proj``; ``×N`` for N folded layers), class, input shapes, output shapes, dtype (``i64 →
f32`` where the main input and output dtypes differ), a note (``raised ValueError``). The path and shape
columns lose characters from their middle to fit ``width``. The last line says what hooks cannot see.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..inspect.trace_records import TraceRow, dtype_text
from ..units import plural
from .style import Style, strip_ansi, visible_len
from .table import render_table

__all__ = ["render_trace", "BLIND_SPOT"]

BLIND_SPOT = "hooks see module calls only: a view/transpose/cat inside a forward is not a row"


def _items(items: Sequence[str], limit: int, named: bool = True) -> str:
    """The first ``limit`` shapes of a cell, then ``+N`` for the rest (a ``+N`` already there counts);
    without ``named`` a keyword's name is dropped (``logits=(1, 7, 256)`` -> ``(1, 7, 256)``)."""
    if not items:
        return "—"
    if not named:
        items = [i.split("=", 1)[1] if "=" in i and not i.startswith("(") else i for i in items]
    extra = 0
    if items[-1].startswith("+"):
        extra, items = int(items[-1][1:]), items[:-1]
    if len(items) > limit:
        extra, items = extra + len(items) - limit, items[:limit]
    return ", ".join(items) + (f", +{extra}" if extra else "")


def _short_paths(rows: Sequence[TraceRow]) -> list[str]:
    """Each path indented by its nesting; under its caller's row only the part after the caller's name."""
    out: list[str] = []
    callers: list[TraceRow] = []
    for r in rows:
        while callers and callers[-1].nest >= r.nest:
            callers.pop()
        caller = callers[-1] if callers else None
        indent = "  " * min(r.nest, 8)
        count = f" ×{r.count}" if r.count > 1 and (caller is None or caller.count != r.count) else ""
        if caller is not None and r.path.startswith(caller.path + "."):
            out.append(indent + r.path[len(caller.path):] + count)
        else:
            out.append(indent + r.path + count)
        callers.append(r)
    return out


def render_trace(rows: Sequence[TraceRow], *, width: int = 100, calls: int = 0, dropped: int = 0,
                 folded: bool = True, style: Style | None = None) -> str:
    """Usage: ``render_trace(collapse_calls(trace.calls), width=100, calls=len(trace.calls))``."""
    style = style or Style()
    if not rows:
        return "trace: no module call was recorded"
    notes = any(r.note for r in rows)
    headers = ["module", "class", "in", "out", "dtype"] + (["note"] if notes else [])
    paths = _short_paths(rows)
    table = ""
    for limit, named in ((3, True), (2, True), (1, True), (1, False)):  # fewer shapes, then no names
        body = []
        for r, path in zip(rows, paths):
            cells = [path, r.class_name, _items(r.inputs, limit, named), _items(r.outputs, limit, named),
                     dtype_text(r.in_dtype, r.out_dtype)]
            if notes:
                cells.append(r.note)
            body.append(cells)
        # the module and class columns shrink; shapes are never cut (fewer of them, then no names, instead)
        table = render_table(headers, body, width=width, shrink=(1, 0), min_width=8, style=style)
        if max(visible_len(line) for line in table.splitlines()) <= width and "…" not in strip_ansi(table):
            break
    summary = f"{plural(calls, 'module call')}"
    if folded and len(rows) < calls:
        summary += f" in {plural(len(rows), 'row')} (identical layers folded; --all lists each)"
    if dropped:
        summary += f"; {dropped} more not recorded (limit reached)"
    return "\n".join([table, style.dim(summary), style.dim(BLIND_SPOT)])
