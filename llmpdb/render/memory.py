"""Text of ``mem``: the CUDA counters, the largest tensors and what models, caches and optimizers hold.

Usage::

    print(render_memory(report, width=100))

Three blocks: ``CUDA: not in use`` or one row per device (allocated, reserved, peak); the largest tensors
(path, shape, dtype, device, bytes, the other paths sharing the storage); then one row per model,
gradient set, KV cache and optimizer. Tables fit ``width`` through ``fit_columns``.
"""

from __future__ import annotations

from ..inspect.memory import DeviceMemory, Holding, MemoryReport, TensorBytes
from ..units import format_shape, human_bytes, plural
from .style import Style
from .table import fit_columns, fit_text, render_table

__all__ = ["render_memory", "render_cuda", "render_largest", "render_holdings"]

_TENSOR_STEPS = [("cut", "also", 12), ("cut", "path", 16), ("hide", "also"), ("hide", "device"),
                 ("cut", "path", 8)]
_HOLDING_STEPS = [("cut", "detail", 24), ("cut", "name", 16), ("hide", "detail")]


def _table(headers, rows, width, steps, right, style) -> list[str]:
    headers, rows, hidden = fit_columns(headers, rows, width, steps)
    right_cols = [headers.index(name) for name in right if name in headers]
    out = [render_table(headers, rows, width=width, shrink=(), right=right_cols, style=style)]
    if hidden:
        out.extend(fit_text(f"(columns hidden to fit {width}: {', '.join(hidden)})", width))
    return out


def render_cuda(cuda: tuple[DeviceMemory, ...] | None, *, width: int = 100, style: Style | None = None) -> list[str]:
    """Usage: ``render_cuda(None)`` -> ``["CUDA: not in use"]``; else a table of the devices' counters."""
    style = style or Style()
    if cuda is None:
        return fit_text("CUDA: not in use (torch.cuda is not initialised)", width)
    if not cuda:
        return ["CUDA: initialised, no devices"]
    rows = [[d.device, human_bytes(d.allocated), human_bytes(d.reserved), human_bytes(d.peak)] for d in cuda]
    return _table(["device", "allocated", "reserved", "peak"], rows, width, [],
                  ["allocated", "reserved", "peak"], style)


def _bytes_cell(row: TensorBytes) -> str:
    """``1.2 MiB``; ``meta`` for a meta tensor; ``0 B (fake)`` for another one that holds no memory."""
    if not row.meta:
        return human_bytes(row.nbytes)
    return "meta" if row.label in ("", "meta") else f"0 B ({row.label})"


def render_largest(rows: list[TensorBytes], storages: int, total: int, *, width: int = 100,
                   style: Style | None = None) -> list[str]:
    """Usage: ``render_largest(rows, storages, total)``; the heading and the table of the largest tensors."""
    style = style or Style()
    if not rows:
        return ["tensors in this frame: none"]
    counts = f"{len(rows)} of {plural(storages, 'storage')}, {human_bytes(total)} in all"
    heads = [f"largest tensors in this frame: {counts} (views and shared storage counted once)",
             f"largest tensors in this frame: {counts}", f"largest tensors: {counts}"]
    head = next((h for h in heads if len(h) <= width), None) or "\n".join(fit_text(heads[-1], width))
    cells = [[r.path, format_shape(r.shape), r.dtype, r.device, _bytes_cell(r),
              ", ".join(r.shared)] for r in rows]
    headers = ["path", "shape", "dtype", "device", "bytes", "also"]
    if not any(r.shared for r in rows):
        headers, cells = headers[:-1], [c[:-1] for c in cells]
    return [style.header(h) if style.color else h for h in head.split("\n")] + _table(headers, cells, width, _TENSOR_STEPS,
                                                                  ["bytes"], style)


def render_holdings(holdings: list[Holding], *, width: int = 100, style: Style | None = None) -> list[str]:
    """Usage: ``render_holdings(holdings)``; one row per model / gradients / kv cache / optimizer."""
    style = style or Style()
    if not holdings:
        return fit_text("models, KV caches, optimizers in sight: none", width)
    rows = [[h.kind, h.name, "?" if h.nbytes is None else human_bytes(h.nbytes), h.detail] for h in holdings]
    return _table(["held by", "name", "bytes", "detail"], rows, width, _HOLDING_STEPS, ["bytes"], style)


def render_memory(report: MemoryReport, *, width: int = 100, style: Style | None = None) -> str:
    """Usage: ``render_memory(report, width=80)``; the whole ``mem`` output, blocks separated by a blank line."""
    style = style or Style()
    blocks = [render_cuda(report.cuda, width=width, style=style),
              render_largest(list(report.tensors), report.storages, report.total_bytes, width=width, style=style),
              render_holdings(list(report.holdings), width=width, style=style)]
    lines: list[str] = []
    for block in blocks:
        if lines:
            lines.append("")
        lines.extend(block)
    for note in report.notes:
        lines.extend(fit_text(f"note: {note}", width))
    return "\n".join(lines)
