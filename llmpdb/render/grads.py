"""The ``grads`` table: parameters grouped by layer, gradient norm and status, and a one-line summary.

Usage::

    render_grads(grad_report(model), width=100)
"""

from __future__ import annotations

import math

from ..inspect.grads import GradReport, ParamGrad
from ..units import plural
from .style import Style
from .table import render_table

__all__ = ["render_grads", "grads_summary"]


def _norm(value: float | None) -> str:
    if value is None:
        return "—"
    if not math.isfinite(value):
        return str(value)
    return f"{value:.3g}"


def _status(p: ParamGrad, style: Style) -> str:
    if p.status == "bad":
        return style.bad(f"NaN {p.nan}, Inf {p.inf}")
    if p.status == "none":
        return style.warn("None (no grad yet)")
    if p.status == "frozen":
        return style.dim("frozen (requires_grad=False)")
    return ""


def grads_summary(report: GradReport) -> str:
    """Usage: ``grads_summary(r)`` -> ``"grads: 16 trainable (16 with a grad) · 9 frozen · total norm 3.1"``."""
    with_grad = report.trainable - report.no_grad_yet
    parts = [f"grads: {report.trainable} trainable ({with_grad} with a grad"
             + (f", {report.no_grad_yet} no grad yet)" if report.no_grad_yet else ")"),
             f"{report.frozen} frozen"]
    if report.bad:
        parts.append(f"NaN/Inf in {plural(report.bad, 'gradient')}")
    if report.total_norm is not None:
        parts.append(f"total norm {_norm(report.total_norm)}")
    return " · ".join(parts)


def render_grads(report: GradReport, *, width: int = 100, style: Style | None = None) -> str:
    """Usage: ``render_grads(grad_report(model), width=100)``; one row a parameter under its layer's row."""
    style = style or Style()
    if not report.groups:
        return "grads: no parameter matches"
    rows = []
    for group, params in report.groups:
        norms = [p.norm for p in params if p.norm is not None]
        group_norm = math.sqrt(sum(n * n for n in norms)) if norms else None
        statuses = {p.status for p in params}
        note = {"frozen": ", all frozen", "none": ", no grad yet"}.get(statuses.pop(), "") if len(statuses) == 1 else ""
        rows.append([style.header(group), "", _norm(group_norm), plural(len(params), "param") + note])
        for p in params:
            rest = p.name[len(group):] if p.name.startswith(group + ".") else p.name
            rows.append(["  " + rest, p.shape, _norm(p.norm), _status(p, style)])
    table = render_table(["parameter", "shape", "grad norm", "status"], rows, width=width, shrink=(0,),
                         right=(2,), style=style)
    return table + "\n" + grads_summary(report)
