"""The ``explain`` view: the exception, the failing expression, one row per operand, the mismatch.

Usage::

    render_explanation(explain_traceback(tb, exc), width=100)

::

    RuntimeError: The size of tensor a (4) must match the size of tensor b (2) at non-singleton dimension 1
    matmul (@): query_states @ key_states.transpose(2, 3)   at attn.py:14 in forward
      query_states                (1, 4, 7, 16)  batch · heads · seq · head_dim
        from model.layers.0.self_attn.q_proj (Linear) → view → transpose → apply_rotary_pos_emb
      key_states.transpose(2, 3)  (1, 2, 16, 7)  batch · kv_heads · head_dim · seq
        from model.layers.0.self_attn.k_proj (Linear) → view → transpose → apply_rotary_pos_emb
      mismatch: dim 1: 4 heads vs 2 kv_heads (batch dims broadcast (aligned from the right))
      hint: GQA not expanded: repeat_kv missing?
"""

from __future__ import annotations

import textwrap

from ..inspect.explain import Explanation
from ..inspect.operands import Operand
from ..inspect.provenance import Provenance
from ..units import format_shape
from .style import Style

__all__ = ["render_explanation", "provenance_text"]


def provenance_text(prov: Provenance) -> str:
    """Usage: ``provenance_text(p)`` -> ``"model.layers.0.self_attn.q_proj (Linear) → view → transpose"``."""
    head = f"{prov.module_path} ({prov.module_class})" if prov.module_path else prov.origin
    return " → ".join((head, *prov.steps))


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 1)] + "…"


def _wrapped(prefix: str, text: str, width: int, paint, indent: str | None = None) -> list[str]:
    """``prefix + text`` wrapped at ``width``, continuations indented by ``indent`` (default: under the
    text); a word longer than a line is broken, so every line fits."""
    pad = " " * len(prefix) if indent is None else indent
    room = max(width - max(len(prefix), len(pad)), 20)
    pieces = textwrap.wrap(text, width=room, break_long_words=True, break_on_hyphens=False) or [""]
    return [(prefix if i == 0 else pad) + paint(piece) for i, piece in enumerate(pieces)]


def _operand_lines(operand: Operand, text_width: int, width: int, style: Style) -> list[str]:
    shape = format_shape(operand.shape) if operand.shape is not None else "?"
    what = " · ".join(operand.dims) if operand.dims else ""
    if operand.shape is None:
        what = operand.kind
    elif not operand.kind.startswith("Tensor "):
        what = f"{what}  {operand.kind}".strip()
    lines = [_cut(f"  {operand.text:<{text_width}}  {shape:<14} {what}".rstrip(), width)]
    if operand.provenance is not None:
        lines.extend(_wrapped("    from ", provenance_text(operand.provenance), width, style.path))
    return lines


def render_explanation(report: Explanation, *, width: int = 100, style: Style | None = None) -> str:
    """Usage: ``render_explanation(report, width=100)``; plain text unless ``style`` has colour."""
    style = style or Style()
    lines = []
    if report.exception:  # the error the user is reading about: whole, wrapped, never cut
        lines.extend(_wrapped("", report.exception, width, style.bad, indent="  "))
    if report.chained:
        lines.extend(_wrapped("", report.chained, width, style.bad, indent="  "))
    if report.expression or report.op:
        head = f"{report.op}: {report.expression}" if report.op else report.expression
        where = f"at {report.location}"
        if len(head) + 3 + len(where) <= width:
            lines.append(f"{style.header(head)}   {where}")
        else:
            lines.extend(_wrapped("", head, width, style.header, indent="  "))
            lines.extend(_wrapped("  ", where, width, str, indent="    "))
    for note in report.notes:
        lines.extend(_wrapped("  ", f"({note})", width, style.dim, indent="   "))
    if report.problem:
        lines.extend(_wrapped("  " if lines else "", report.problem, width, str, indent="  "))
        return "\n".join(lines)
    text_width = min(max((len(o.text) for o in report.operands), default=0), 40)
    for operand in report.operands:
        lines.extend(_operand_lines(operand, text_width, width, style))
    if report.diagnosis:
        lines.extend(_wrapped(f"  {report.label}: ", report.diagnosis, width, style.warn))
    elif report.label != "mismatch":
        lines.extend(_wrapped(f"  {report.label}: ", "? (the key or the container is not read)", width, str))
    elif any(o.shape is None for o in report.operands):
        lines.extend(_wrapped("  mismatch: ", "? (an operand's shape is not known)", width, str))
    elif report.op and report.exception:
        lines.extend(_wrapped("  mismatch: ", "none found in the shapes (the error is about something else?)",
                              width, str))
    if report.hint:
        lines.extend(_wrapped("  hint: ", report.hint, width, style.warn))
    return "\n".join(lines)
