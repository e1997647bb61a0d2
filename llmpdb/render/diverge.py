"""The ``diverge`` report: module calls compared in the order their outputs were produced, then the verdict.

Usage::

    render_diverge(report, width=100, show_all=False)

One row per compared call (#: its rank in start order, module path, class, max abs and max rel error of
its outputs, ``ok`` or ``DIFFERS``; ``*``: a tensor of one run only, named below the table), up to and
including the first that differs; without ``show_all`` only
the last ``TAIL`` rows before it are listed (the ones before are counted). Then the first differing
tensor, whether the module's inputs already differed (where the difference comes from), and every limit
of the answer (memory budget, a different call structure, hooks that failed).
"""

from __future__ import annotations

import textwrap

from ..inspect.diverge_records import CallCompare, DivergeReport, TensorDiff
from ..units import human_bytes, plural
from .style import Style
from .table import render_table

__all__ = ["render_diverge", "TAIL", "number", "fit"]

TAIL = 12


def number(value: float | None) -> str:
    """Usage: ``number(0.00123)`` -> ``"1.23e-03"``; ``0`` stays ``0``; None -> ``?``."""
    if value is None:
        return "?"
    if value == 0:
        return "0"
    if value == float("inf"):
        return "inf"
    return f"{value:.3g}" if 1e-2 <= abs(value) < 1e4 else f"{value:.2e}"


def row_notes(call: CallCompare) -> list[str]:
    """``output[1] only in run 2``: tensors of one run only (not compared), or another remark on the outputs."""
    return [f"{d.where} {d.note}" for d in call.outputs if d.note]


def has_values(call: CallCompare) -> bool:
    """Some output tensor of the call was compared by value (a meta tensor or a call without tensor
    outputs has none: no verdict on it)."""
    return any(d.max_abs is not None for d in call.outputs)


def _row(call: CallCompare, style: Style) -> list[str]:
    status = style.bad("DIFFERS") if call.beyond else ("ok" if has_values(call) else "?")
    return [str(call.order), call.path, call.class_name, number(call.largest("abs")), number(call.largest("rel")),
            status + ("*" if row_notes(call) else "")]


def _footnote(rows: list[CallCompare]) -> str | None:
    notes = [f"{c.path} {n}" for c in rows for n in row_notes(c)]
    if not notes:
        return None
    more = f" (+{len(notes) - 3})" if len(notes) > 3 else ""
    return "* " + "; ".join(notes[:3]) + more


def _diff_text(d: TensorDiff) -> str:
    if d.max_abs is None:
        return f"{d.where}: {d.note}"
    text = f"{d.where}: max abs {number(d.max_abs)}, max rel {number(d.max_rel)}"
    if d.beyond and d.numel:
        text += f"\n    {d.count} of {d.numel} values beyond atol {number(d.atol)} + rtol {number(d.rtol)}·|a|"
    return text + (f"; {d.note}" if d.note else "")


def _origin(call: CallCompare) -> str:
    if not call.inputs:
        return "origin: ? (this call's inputs were not recorded or hold no tensor)"
    bad = call.inputs_beyond
    if bad is None:
        largest = call.largest("abs", inputs=True)
        same = "identical" if not largest else f"within tolerance (max abs {number(largest)})"
        return f"origin: this module — its inputs were {same}, its outputs are not"
    head, _, rest = _diff_text(bad).partition(": ")
    lines = [f"origin: not this module — its input {head} already differed: {rest}"]
    if call.enclosing is None:
        lines.append("  the expression's own inputs differ between the two runs")
    else:
        path, cls = call.enclosing
        lines.append("  every module output before it matched: the difference arose in the code of")
        lines.append(f"  {path} ({cls}), outside its submodule calls")
    return "\n".join(lines)


def fit(line: str, width: int) -> str:
    """Usage: ``fit(long_line, 80)``; the line wrapped at spaces to ``width`` columns, continuation lines
    indented two more than the first."""
    if len(line) <= width:
        return line
    lead = " " * (len(line) - len(line.lstrip(" ")) + 2)
    return "\n".join(textwrap.wrap(line, width, subsequent_indent=lead, break_on_hyphens=False)) or line


def _table(report: DivergeReport, width: int, style: Style, show_all: bool) -> list[str]:
    rows = report.rows
    skipped = 0
    if not show_all and len(rows) > TAIL + 1:
        skipped = len(rows) - TAIL - 1
        rows = rows[skipped:]
    lines = []
    if skipped:
        lines.append(style.dim(fit(f"… {plural(skipped, 'earlier module call')} matched (--all lists them)", width)))
    body = [_row(c, style) for c in rows]
    lines.append(render_table(["#", "module", "class", "max abs", "max rel", ""], body, width=width,
                              shrink=(1, 2), right=(0, 3, 4), style=style))
    footnote = _footnote(rows)
    if footnote:
        lines.append(style.dim(fit(footnote, width)))
    return lines


def render_diverge(report: DivergeReport, *, width: int = 100, show_all: bool = False,
                   style: Style | None = None) -> str:
    """Usage: ``render_diverge(report, width=100)``; the whole report as text."""
    style = style or Style()
    out: list[str] = []

    def add(text: str, styler=None) -> None:
        fitted = "\n".join(fit(line, width) for line in text.split("\n"))
        out.append(styler(fitted) if styler is not None else fitted)

    add(f"diverge: {report.expr}  vs  {report.setting}")
    add(f"  second run: {report.variant}", style.dim)
    add(f"  tolerance: {report.tolerance}; |a-b| <= atol + rtol·|a| in float32, a: run 1", style.dim)
    for n in report.notes:
        add(f"  note: {n}", style.warn)
    if report.rows:
        out.extend(_table(report, width, style, show_all))
    first = report.first
    if first is not None:
        add(f"first divergence: {first.path} ({first.class_name}), call #{first.order}", style.bad)
        bad = first.first_beyond
        add(f"  first differing tensor: {_diff_text(bad)}" if bad is not None else "  ?")
        add(_origin(first))
    elif report.structure:
        add(f"the two runs call different modules: {report.structure}", style.bad)
    elif not report.errors:
        largest = max(report.rows, key=lambda c: c.largest("abs") or 0, default=None)
        where = (f"\n  largest max abs {number(largest.largest('abs'))} at {largest.path}"
                 if largest is not None and largest.largest("abs") else "")
        scope = " (only the calls recorded: see memory)" if report.over_budget_at is not None else ""
        valued = [c for c in report.rows if has_values(c)]
        blind = len(report.rows) - len(valued)
        if report.rows and not valued:
            add(f"no verdict (?): none of the {plural(len(report.rows), 'module call')} had output values to compare "
                "(meta tensors, or no tensor outputs)", style.warn)
        else:
            add(f"no divergence: {plural(len(valued), 'module call')} compared{scope}, every output within "
                f"tolerance{where}")
            if blind:
                add(f"  ? {plural(blind, 'module call')} had no output values to compare (meta tensors, or no tensor "
                    "outputs)", style.warn)
    if report.over_budget_at is not None:
        add(f"memory: the records reached the budget of {human_bytes(report.budget)} at call "
            f"#{report.over_budget_at}: only the {plural(report.recorded, 'call')} recorded before were compared, "
            f"of {report.calls_first} (raise --max-mem)", style.warn)
    if first is None and not report.structure and not report.errors and report.calls_first != report.calls_second:
        add(f"run 1 made {report.calls_first} module calls, run 2 {report.calls_second}", style.warn)
    for e in report.errors:
        add(f"error: {e}", style.bad)
    add(f"records: {plural(report.recorded, 'call')} of {report.calls_first}, {human_bytes(report.used)} kept "
        f"(budget {human_bytes(report.budget)})", style.dim)
    return "\n".join(out)
