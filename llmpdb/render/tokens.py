"""The ``tokens`` view: per sequence a summary line, then position, id, token, decoded text, note.

Usage::

    render_tokens(token_report(tok, ids, mask), width=100, limit=64)
"""

from __future__ import annotations

from ..inspect.tokens import SequenceReport, TokenReport, TokenRow
from ..units import plural
from .style import Style
from .table import render_table

__all__ = ["render_tokens"]


def _pos(row: TokenRow) -> str:
    return str(row.pos) if row.count == 1 else f"{row.pos}-{row.pos + row.count - 1}"


def _cells(row: TokenRow, style: Style) -> list[str]:
    note = f"{row.note} ×{row.count}" if row.count > 1 else row.note
    styled = style.dim(note) if row.note == "pad" else style.warn(note) if "attended" in note else note
    return [_pos(row), str(row.id), row.token, repr(row.text) if row.text else "", styled]


def _summary(seq: SequenceReport, report: TokenReport) -> str:
    text = f"row {seq.row}: {plural(seq.length, 'token')}, {seq.attended} attended"
    if seq.pad_positions:
        text += f", {len(seq.pad_positions)} padding on the {seq.pad_side}" if seq.pad_side in ("left", "right") \
            else f", {len(seq.pad_positions)} padding ({seq.pad_side})"
    return text


def render_tokens(report: TokenReport, *, width: int = 100, limit: int = 64, style: Style | None = None) -> str:
    """``limit`` rows per sequence at most: the first and last halves, with the count left out between."""
    style = style or Style()
    special = ", ".join(f"{tok} {tid}" for tid, tok in sorted(report.special.items())) or "none"
    lines = [f"tokenizer: padding_side {report.padding_side or '?'} · pad id "
             f"{'none' if report.pad_id is None else report.pad_id} · special: {special}"]
    for seq in report.sequences:
        lines.append(style.header(_summary(seq, report)))
        rows = seq.tokens
        body = [_cells(r, style) for r in rows]
        if len(body) > limit:
            half = limit // 2
            body = body[:half] + [["…", "", f"{len(body) - 2 * half} rows left out", "", ""]] + body[-half:]
        table = render_table(["pos", "id", "token", "text", "note"], body, width=width, shrink=(3, 2),
                             right=(1,), style=style)
        lines.extend(table.splitlines())
        if report.max_length is not None and seq.length == report.max_length:
            lines.append(style.warn(f"warning: length {seq.length} = tokenizer.model_max_length: "
                                    "the input was probably truncated"))
    return "\n".join(lines)
