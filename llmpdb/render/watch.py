"""Watched expressions as text: the history table of ``watch`` and the line a stop prints on a change.

Usage::

    render_watches(watches, width=100)     # every watch, one block each: stops, where, value, ← what changed
    render_change(watch, previous_run)     # "watch 1 attention_mask: (1, 7) i64 → (1, 1, 7, 7) bool  (shape, dtype)"
"""

from __future__ import annotations

from collections.abc import Sequence

from ..inspect.watch_records import Run, Watch, changed_fields
from ..units import plural
from .style import Style
from .table import render_table

__all__ = ["render_watches", "render_change"]


def _stops(run: Run) -> str:
    return str(run.first) if run.first == run.last else f"{run.first}-{run.last}"


def render_change(watch: Watch, previous: Run, style: Style | None = None) -> str:
    """The one line a stop prints when a watched value differs from the stop before."""
    style = style or Style()
    now = watch.runs[-1]
    what = changed_fields(previous.sample, now.sample)
    return style.warn(f"watch {watch.number} {watch.expr}: {previous.sample.text} → {now.sample.text}  ({what})")


def render_watches(watches: Sequence[Watch], *, width: int = 100, style: Style | None = None) -> str:
    """Usage: ``render_watches(watches, width=100)``; "no watch set" when there is none."""
    style = style or Style()
    if not watches:
        return "watch: nothing watched (watch EXPR to start)"
    blocks = []
    for watch in watches:
        changes = sum(1 for a, b in zip(watch.runs, watch.runs[1:]) if a.sample != b.sample)
        head = f"watch {watch.number}: {watch.expr}  ({plural(changes, 'change')})"
        rows = []
        for i, run in enumerate(watch.runs):
            mark = f"← {changed_fields(watch.runs[i - 1].sample, run.sample)}" if i else ""
            value = style.warn(run.sample.text) if run.sample.error else run.sample.text
            rows.append([_stops(run), run.places, value, style.warn(mark) if mark else ""])
        table = render_table(["stop", "at", "value", "changed"], rows, width=width - 2, shrink=(1, 2, 3), min_width=12,
                             style=style)
        blocks.append(head + "\n" + "\n".join("  " + line for line in table.splitlines()))
    return "\n".join(blocks)
