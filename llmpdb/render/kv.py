"""KV-cache reports to text: the summary line, the per-layer table, one layer in detail, the growth history.

Usage::

    text = render_cache(report, width=100, path="cache")
    text = render_layer(report, report.layer(0), stats={"keys": tensor_stats(t)}, width=100)
    text = render_history(entries, width=100)
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from ..inspect.kv import CacheReport, KvHistoryEntry, LayerReport, head_sharing, index_ranges
from ..inspect.kv_layers import TensorMeta
from ..inspect.stats import TensorStats
from .style import Style, visible_len
from .table import fit_columns, render_table
from ..units import format_shape, human_bytes, plural

__all__ = ["render_cache", "render_layer", "render_history", "format_shape", "COLLAPSE_ABOVE"]

COLLAPSE_ABOVE = 8
"""A part with more layers than this shows runs of identical rows as one row (``0-31``)."""
HISTORY_ROWS = 20
NONE = "—"



def _num(value: int | None) -> str:
    return NONE if value is None else str(value)


def _seq_text(report: CacheReport) -> str:
    main = [l for l in report.main_layers if l.has_attention]
    if not main and any(l.states for l in report.main_layers):
        return "no keys/values (linear-attention states only)"
    if report.seq is None:
        return "empty" if not any(l.initialized for l in main) else "seq ?"
    if report.capacity is not None and any("static" in l.kind for l in main):
        return f"seq {report.seq} filled / {report.capacity} capacity"
    if all(l.filled == report.seq for l in main if l.initialized):
        return f"seq {report.seq} (filled)"
    return f"seq {report.seq}"


def _summary(report: CacheReport, path: str, style: Style, width: int) -> str:
    parts = [style.header(report.class_name)]
    if path:
        parts[0] = f"{style.path(path)}: {parts[0]}"
    count = len(report.main_layers)
    parts.append(plural(count, "layer") + (" (self + cross)" if len(report.parts) > 1 else ""))
    parts.append(_seq_text(report))
    if len(report.parts) > 1:
        lengths = sorted({l.filled for l in report.part_layers(report.parts[1]) if l.filled is not None})
        if lengths:
            parts.append("cross " + "/".join(map(str, lengths)))
    if report.latent is not None:  # MLA: one shared latent "head", not MQA
        parts.append("MLA latent" + (f" / q heads {report.q_heads}" if report.q_heads is not None else ""))
        parts.append(f"kv_lora_rank {report.latent[0]} + qk_rope_head_dim {report.latent[1]}")
    elif report.kv_heads is not None:
        heads = f"kv heads {report.kv_heads}"
        if report.q_heads is not None:
            heads += f" / q heads {report.q_heads}"
            sharing = head_sharing(report.q_heads, report.kv_heads)
            heads += f" ({sharing})" if sharing else ""
        parts.append(heads)
    if report.head_dim is not None and report.latent is None:
        same = report.v_head_dim in (None, report.head_dim)
        parts.append(f"head_dim {report.head_dim}" + ("" if same else f"/{report.v_head_dim}"))
    if report.batch not in (None, 1):
        parts.append(f"batch {report.batch}")
    where = " ".join(x for x in (report.dtype, report.device) if x)
    if where:
        parts.append(where)
    parts.append("0 B resident (meta)" if report.device == "meta" else human_bytes(report.nbytes))
    return _pack(parts, width)


def _pack(parts: list[str], width: int) -> str:
    """Join ``parts`` with two spaces, starting a new (indented) line rather than passing ``width``."""
    lines = [parts[0]]
    for part in parts[1:]:
        if visible_len(lines[-1]) + 2 + visible_len(part) > width:
            lines.append("  " + part)
        else:
            lines[-1] += "  " + part
    return "\n".join(lines)


def _memory(report: CacheReport, width: int) -> str:
    if report.formula_bytes is None:
        return ""
    if report.device == "meta":  # no storage: the formula is what it would take once materialised
        text = f"memory 0 B resident (meta tensors); {human_bytes(report.formula_bytes)} once materialised = {report.formula}"
    elif report.formula_bytes == report.nbytes:
        text = f"memory {human_bytes(report.nbytes)} = {report.formula}"
    else:
        text = (f"memory {human_bytes(report.nbytes)} ≠ {human_bytes(report.formula_bytes)} from "
                f"{report.formula}: " + "; ".join(report.differences))
    return textwrap.fill(text, width=max(width, 40), subsequent_indent="  ", break_on_hyphens=False)


def _states_text(layer: LayerReport) -> str:
    """``conv[0] (2, 128, 4), recurrent[0] (2, 128, 8)``."""
    return ", ".join(f"{m.name.replace('_states', '')} {format_shape(m.shape)}" for m in layer.states) or NONE


def _cut_states(text: str, limit: int) -> str:
    """The states that fit in ``limit`` (whole entries: a shape is never cut), then ``+N more``; the first entry
    is kept whole even when it is wider (the table then hides other columns, or this one)."""
    entries = _split_entries(text)
    kept: list[str] = []
    for i, entry in enumerate(entries):
        rest = len(entries) - i - 1
        candidate = ", ".join(kept + [entry]) + (f" +{rest} more" if rest else "")
        if kept and visible_len(candidate) > limit:
            break
        kept.append(entry)
    left = len(entries) - len(kept)
    return ", ".join(kept) + (f" +{left} more" if left else "")


def _split_entries(text: str) -> list[str]:
    """``"conv (2, 4), recurrent (2, 8)"`` -> ``["conv (2, 4)", "recurrent (2, 8)"]`` (commas in shapes kept)."""
    entries, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            entries.append(text[start:i].strip())
            start = i + 1
    entries.append(text[start:].strip())
    return [e for e in entries if e]


def _row(layer: LayerReport, cols: dict[str, bool]) -> list[str]:
    linear_only = layer.kind in ("linear", "dummy")
    keys = NONE if layer.keys is None or linear_only else format_shape(layer.keys.shape)
    values = NONE if layer.values is None or linear_only else format_shape(layer.values.shape)
    if layer.kind == "dummy":
        fill = NONE
    elif layer.kind == "linear":
        fill = "n/a"
    else:
        fill = f"{_num(layer.filled)} / {_num(layer.capacity)}"
    row = [layer.part] if cols["part"] else []
    row += [str(layer.index), layer.kind, keys, values, fill]
    if cols["seen"]:
        row.append(_num(layer.seen) if layer.has_attention else NONE)
    if cols["quantized"]:
        row.append(NONE if layer.quantized is None else f"{layer.quantized} + {_num(layer.filled)} residual")
    row.append("?" if layer.window is None and "sliding" in layer.kind else _num(layer.window))
    if cols["states"]:
        row.append(_states_text(layer))
    if cols["device"]:
        device = (layer.keys.device if layer.keys else (layer.states[0].device if layer.states else NONE))
        row.append(device + (f" (home {layer.home_device})" if layer.home_device else ""))
    return row


def _collapse(rows: list[list[str]], index_col: int) -> list[list[str]]:
    """Merge consecutive rows equal but for the layer index into ``first-last``."""
    out: list[list[str]] = []
    for row in rows:
        prev = out[-1] if out else None
        if prev is not None and prev[:index_col] + prev[index_col + 1:] == row[:index_col] + row[index_col + 1:]:
            prev[index_col] = prev[index_col].split("-")[0] + "-" + row[index_col]
        else:
            out.append(list(row))
    return out


def _layer_notes(report: CacheReport) -> list[str]:
    grouped: dict[str, list[LayerReport]] = {}
    for layer in report.layers:
        for note in layer.notes:
            grouped.setdefault(note, []).append(layer)
    out = []
    for note, layers in grouped.items():
        idx = [l.index for l in layers]
        parts = sorted({l.part for l in layers})
        who = ("layer " if len(idx) == 1 else "layers ") + index_ranges(sorted(set(idx)))
        out.append(f"{' / '.join(p for p in parts if p) + ' ' if any(parts) else ''}{who}: {note}")
    return out




# How each table fits its width, in order, each step only while still too wide (docs/commands.md, `kv`).
CACHE_STEPS: tuple[tuple, ...] = (
    ("cut", "states", 20, _cut_states), ("rename", "filled/capacity", "fill/cap"), ("hide", "seen"), ("hide", "device"),
    ("hide", "window"), ("cut", "quantized", 12), ("hide", "values"), ("hide", "states"), ("hide", "quantized"),
)
LAYER_STEPS: tuple[tuple, ...] = (
    ("hide", "device"), ("hide", "bytes"), ("hide", "std"), ("hide", "mean"), ("hide", "dtype"),
    ("cut", "tensor", 8),
)
HISTORY_STEPS: tuple[tuple, ...] = (
    ("cut", "filled per layer", 10), ("hide", "growth"), ("hide", "bytes"), ("cut", "cache", 10),
)


def _hidden(columns: Sequence[str], width: int) -> list[str]:
    if not columns:
        return []
    return [f"{', '.join(columns)} column{'s' * (len(columns) > 1)} hidden to fit {width} columns"]


def render_cache(report: CacheReport, *, width: int = 100, style: Style | None = None, path: str = "") -> str:
    """Usage: ``render_cache(inspect_cache(cache), width=100, path="cache")``; summary, memory line, table, notes."""
    style = style or Style()
    lines = [_summary(report, path, style, width)]
    memory = _memory(report, width)
    if memory:
        lines.append(memory)
    if not report.layers:
        lines.extend(report.notes or ("no layers",))
        return "\n".join(lines)
    devices = {(l.keys.device if l.keys else None) for l in report.layers} - {None}
    cols = {
        "part": len(report.parts) > 1,
        "seen": any(l.seen != l.filled for l in report.layers if l.has_attention and l.initialized),
        "quantized": any(l.quantized is not None for l in report.layers),
        "states": any(l.states for l in report.layers),
        "device": len(devices) > 1 or any(l.home_device for l in report.layers),
    }
    headers = (["part"] if cols["part"] else []) + ["layer", "type", "keys", "values", "filled/capacity"]
    headers += [h for h, on in (("seen", cols["seen"]), ("quantized", cols["quantized"])) if on] + ["window"]
    headers += [h for h in ("states", "device") if cols[h]]
    index_col = 1 if cols["part"] else 0
    rows: list[list[str]] = []
    for part in report.parts:
        part_rows = [_row(l, cols) for l in report.part_layers(part)]
        rows += _collapse(part_rows, index_col) if len(part_rows) > COLLAPSE_ABOVE else part_rows
    headers, rows, hidden = fit_columns(headers, rows, width, CACHE_STEPS)  # shapes are never cut
    lines.append(render_table(headers, rows, width=width, shrink=(), style=style))
    lines.extend(style.dim(line) for line in _hidden(hidden, width))
    mla = [] if report.latent is None else [
        f"MLA: keys hold the compressed latent (kv_lora_rank {report.latent[0]}), values the rotary key "
        f"(qk_rope_head_dim {report.latent[1]}), one head shared by every query head; attention expands them "
        "(kv_b_proj)"]
    for note in mla + list(report.notes) + _layer_notes(report):
        lines.append(style.dim(textwrap.fill(note, width=max(width, 40), subsequent_indent="  ")))
    return "\n".join(lines)


def _g(value: float | None) -> str:
    return NONE if value is None else f"{value:.4g}"


def render_layer(
    report: CacheReport,
    layer: LayerReport,
    *,
    stats: Mapping[str, TensorStats | str] | None = None,
    width: int = 100,
    style: Style | None = None,
) -> str:
    """Usage: ``render_layer(report, report.layer(0))``; every tensor of the layer, values only with ``stats``."""
    style = style or Style()
    part = f" ({layer.part})" if layer.part else ""
    head = [style.header(f"layer {layer.index}{part}"), layer.kind, layer.class_name]
    if layer.has_attention:
        head.append(f"filled {_num(layer.filled)} / {_num(layer.capacity)}")
        if layer.seen != layer.filled:
            head.append(f"seen {_num(layer.seen)}")
    if layer.window is not None:
        head.append(f"window {layer.window}")
    if layer.quantized is not None:
        head.append(f"quantized {layer.quantized} + residual {_num(layer.filled)}"
                    + (f" (of {layer.residual_capacity})" if layer.residual_capacity else ""))
    head.append(f"of {report.class_name}")
    lines = [_pack(head, width)]
    tensors: tuple[TensorMeta, ...] = layer.tensors
    if not tensors:
        lines.append("no tensors" + (f": {layer.notes[0]}" if layer.notes else ""))
        return "\n".join(lines)
    headers = ["tensor", "shape", "dtype", "device", "bytes"]
    if stats is not None:
        headers += ["min", "max", "mean", "std", "nan", "inf"]
    rows = []
    for meta in tensors:
        row = [meta.name, format_shape(meta.shape), meta.dtype, meta.device,
               "meta" if meta.device == "meta" else human_bytes(meta.nbytes)]
        if stats is not None:
            st = stats.get(meta.name)
            if isinstance(st, TensorStats):
                row += [_g(st.min), _g(st.max), _g(st.mean), _g(st.std), str(st.nan), str(st.inf)]
            else:
                row += [st or NONE]
        rows.append(row)
    headers, rows, hidden = fit_columns(headers, rows, width, LAYER_STEPS)  # shapes are never cut
    right = [i for i, name in enumerate(headers) if name in ("bytes", "min", "max", "mean", "std", "nan", "inf")]
    lines.append(render_table(headers, rows, width=width, shrink=(), right=right, style=style))
    lines.extend(style.dim(line) for line in _hidden(hidden, width))
    if layer.kind in ("static", "static-sliding") and layer.filled is not None and layer.capacity:
        free = layer.capacity - layer.filled
        if free == 1:
            lines.append(style.dim(f"position {layer.filled} of the preallocated tensors is not filled yet"))
        elif free > 1:
            lines.append(style.dim(f"positions {layer.filled}-{layer.capacity - 1} of the preallocated tensors "
                                   "are not filled yet"))
    lines.extend(style.dim(n) for n in layer.notes)
    return "\n".join(lines)


def _filled_text(filled: Sequence[int | None]) -> str:
    values = [NONE if f is None else str(f) for f in filled]
    if values and len(set(values)) == 1:
        return values[0] + (f" ×{len(values)}" if len(values) > 1 else "")
    return " ".join(values) or NONE


def _runs(entries: Sequence[KvHistoryEntry]) -> list[list[KvHistoryEntry]]:
    """Consecutive entries of one cache that did not shrink (a shorter cache means a new generation)."""
    runs: list[list[KvHistoryEntry]] = []
    for entry in entries:
        prev = runs[-1][-1] if runs else None
        shrank = prev is not None and None not in (prev.seq, entry.seq) and entry.seq < prev.seq
        if prev is not None and prev.cache_id == entry.cache_id and not shrank:
            runs[-1].append(entry)
        else:
            runs.append([entry])
    return runs


def _growth_line(run: list[KvHistoryEntry]) -> str:
    seqs = [NONE if e.seq is None else str(e.seq) for e in run]
    if len(seqs) > 10:
        seqs = seqs[:3] + ["…"] + seqs[-4:]
    steps = {b.seq - a.seq for a, b in zip(run, run[1:]) if a.seq is not None and b.seq is not None}
    per = f" (+{steps.pop()} per stop)" if len(steps) == 1 and len(run) > 1 else ""
    first = run[0]
    return f"{first.class_name}{f' ({first.path})' if first.path else ''}: seq " + " -> ".join(seqs) + per


def render_history(entries: Sequence[Any], *, width: int = 100, style: Style | None = None) -> str:
    """Usage: ``render_history(SESSION.memory("kv-history", list))``; growth per cache, then one row per stop."""
    style = style or Style()
    if not entries:
        return textwrap.fill("kv history: nothing recorded yet (it records at each stop where `kv` runs or a cache "
                             "is found)", width=max(width, 40), subsequent_indent="  ")
    runs = _runs(entries)
    many = len(runs) > 1
    lines = [style.header(f"kv history: {plural(len(entries), 'stop')}, "
                          f"{plural(len(runs), 'cache')}")]
    for n, run in enumerate(runs, start=1):
        lines.append((f"run {n}  " if many else "") + _growth_line(run))
    headers = ["stop"] + (["run"] if many else []) + ["cache", "seq", "filled per layer", "bytes", "growth"]
    rows = []
    for n, run in enumerate(runs, start=1):
        prev = None
        for entry in run:
            growth = ""
            if prev is not None and prev.seq is not None and entry.seq is not None:
                growth = f"{entry.seq - prev.seq:+d}"
            rows.append([str(entry.stop)] + ([str(n)] if many else []) + [
                entry.class_name, _num(entry.seq), _filled_text(entry.filled), human_bytes(entry.nbytes), growth])
            prev = entry
    hidden = max(0, len(rows) - HISTORY_ROWS)
    headers, shown, gone = fit_columns(headers, rows[hidden:], width, HISTORY_STEPS)
    lines.append(render_table(headers, shown, width=width, shrink=(), right=(0,), style=style))
    lines.extend(style.dim(line) for line in _hidden(gone, width))
    if hidden:
        lines.append(style.dim(f"({plural(hidden, 'earlier stop')} not shown)"))
    return "\n".join(lines)
