"""Records of one traced forward pass, and the folding of identical consecutive layers.

Usage::

    calls = [TraceCall(0, "model.embed_tokens", "Embedding", 1, ("(1, 7)",), ("(1, 7, 64)",), "i64", "f32")]
    rows = collapse_calls(calls)          # layers.0 … layers.1 with equal sub-calls -> "layers.{0..1}" ×2
    rows = collapse_calls(calls, fold=False)   # every call, one row each

A ``TraceCall`` is one module call in the order the calls started; ``nest`` is how many traced calls
were running around it. A call's sub-calls are the calls right after it with a deeper ``nest``. Sibling
calls ``prefix.N[.rest]``, ``prefix.N+1[.rest]``… whose own rows and sub-calls are equal (classes, shapes, dtypes,
names relative to the layer) fold into one block named ``prefix.{N..M}`` with a count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

__all__ = ["TraceCall", "TraceRow", "TraceReport", "collapse_calls", "dtype_text"]

_INDEXED = re.compile(r"^(.*?)(\d+)((?:\.[^.\d][^.]*)*)$")  # the last numeric part: prefix, N, suffix


@dataclass(frozen=True)
class TraceCall:
    """One module call: its path, class, ``nest``, input and output shapes, main dtypes, and a note."""

    order: int
    path: str
    class_name: str
    nest: int
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    in_dtype: str | None = None
    out_dtype: str | None = None
    note: str = ""                      # "raised ValueError", "not finished"


@dataclass(frozen=True)
class TraceRow:
    """A row to show: a call, or ``count`` identical consecutive layers folded into one."""

    path: str
    class_name: str
    nest: int
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    in_dtype: str | None
    out_dtype: str | None
    note: str = ""
    count: int = 1


@dataclass(frozen=True)
class TraceReport:
    """What ``llmpdb.trace`` returns: every module call (``calls``, in the order they started), the rows
    the table shows (``rows``: identical layers folded unless asked not to), calls dropped past the limit,
    and what the traced call returned (``output``)."""

    calls: tuple[TraceCall, ...]
    rows: tuple[TraceRow, ...]
    dropped: int = 0
    output: Any = None


def dtype_text(in_dtype: str | None, out_dtype: str | None) -> str:
    """Usage: ``dtype_text("i64", "f32")`` -> ``"i64 → f32"``; ``dtype_text("f32", "f32")`` -> ``"f32"``."""
    if in_dtype == out_dtype or in_dtype is None or out_dtype is None:
        return out_dtype or in_dtype or "—"
    return f"{in_dtype} → {out_dtype}"


def _block_end(calls: list[TraceCall], start: int) -> int:
    """Index after the last sub-call of ``calls[start]``."""
    end = start + 1
    while end < len(calls) and calls[end].nest > calls[start].nest:
        end += 1
    return end


def _signature(calls: list[TraceCall], prefix: str) -> tuple:
    """What must be equal for two layers to fold: every row with the layer's own name taken out."""
    base = calls[0].nest
    out = []
    for c in calls:
        rel = c.path[len(prefix):] if c.path.startswith(prefix) else "\0" + c.path
        out.append((rel, c.class_name, c.nest - base, c.inputs, c.outputs, c.in_dtype, c.out_dtype, c.note))
    return tuple(out)


def _next_index(path: str, prefix: str, suffix: str, index: int) -> bool:
    match = _INDEXED.match(path)
    return bool(match) and match.group(1) == prefix and match.group(3) == suffix and int(match.group(2)) == index + 1


def _as_row(call: TraceCall, path: str | None = None, count: int = 1) -> TraceRow:
    return TraceRow(path if path is not None else call.path, call.class_name, call.nest, call.inputs,
                    call.outputs, call.in_dtype, call.out_dtype, call.note, count)


def collapse_calls(calls: list[TraceCall], *, fold: bool = True) -> list[TraceRow]:
    """Usage: ``collapse_calls(calls)``; rows in call order, identical consecutive layers folded."""
    if not fold:
        return [_as_row(c) for c in calls]
    rows: list[TraceRow] = []
    i = 0
    while i < len(calls):
        call = calls[i]
        match = _INDEXED.match(call.path)
        end = _block_end(calls, i)
        if match is None:
            rows.append(_as_row(call))
            i += 1
            continue
        prefix, first, suffix = match.group(1), int(match.group(2)), match.group(3)
        signature = _signature(calls[i:end], call.path)
        count, last, stop = 1, first, end
        while stop < len(calls) and calls[stop].nest == call.nest and _next_index(calls[stop].path, prefix, suffix, last):
            nxt_end = _block_end(calls, stop)
            if _signature(calls[stop:nxt_end], calls[stop].path) != signature:
                break
            count, last, stop = count + 1, last + 1, nxt_end
        if count == 1:
            rows.append(_as_row(call))
            i += 1
            continue
        folded = f"{prefix}{{{first}..{last}}}{suffix}"
        rows.append(_as_row(call, folded, count))
        inner = collapse_calls(calls[i + 1:end], fold=True)
        rows.extend(replace(r, path=folded + r.path[len(call.path):] if r.path.startswith(call.path) else r.path,
                            count=r.count * count) for r in inner)
        i = stop
    return rows
