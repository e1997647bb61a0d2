"""Per-tensor fingerprints and exact distances, computed on each tensor's own device.

Usage: ``fingerprints([w, b])`` -> per tensor ``(sum, sumsq, nan, inf, samples)`` or why not;
``free_bytes("cuda:0")``. Reads tensor values: used only by ``statediff snap``, which the user asks for.
"""

from __future__ import annotations

import math
from typing import Any

from .fingerprint_batch import BATCH, SMALL, batch_stats
from .stats import no_stats_reason

__all__ = ["SAMPLES", "CHUNK", "fingerprints", "free_bytes"]

SAMPLES = 256  # strided sample values kept per tensor
CHUNK = 1 << 22  # elements converted to float64 at a time (32 MiB), on the tensor's device


def _prepare(t: Any) -> Any:
    """The tensor to fingerprint, or a string saying why it cannot be."""
    import torch

    reason = no_stats_reason(t)
    if reason is not None:
        return f"{reason} tensor (no values)"
    if t.layout != torch.strided or getattr(t, "is_quantized", False):
        return f"{t.layout} / quantized tensor not fingerprinted"
    if t.numel() == 0:
        return "empty"
    return torch.view_as_real(t) if t.is_complex() else t


def _rows(t: Any) -> list[Any]:
    """Views of ``t`` holding at most about ``CHUNK`` elements each (dim-0 slices, or a flat view)."""
    x = t.reshape(1) if t.dim() == 0 else (t.view(-1) if t.is_contiguous() else t)
    step = max(1, CHUNK // max(1, x.numel() // max(1, x.shape[0])))
    return [x[i:i + step] for i in range(0, x.shape[0], step)]


def _wide(device: Any) -> Any:
    import torch

    return torch.float32 if getattr(device, "type", "") == "mps" else torch.float64  # MPS has no float64


def _stats(t: Any) -> Any:
    """A float64 vector on ``t``'s device: [sum, sum of squares (finite values), nan, inf, samples...]."""
    import torch

    wide = _wide(t.device)
    acc = torch.zeros(4, dtype=wide, device=t.device)
    for part in _rows(t):
        c = part.to(wide)
        nan, finite = torch.isnan(c).sum().to(wide), torch.isfinite(c)
        c = torch.where(finite, c, 0.0)
        acc += torch.stack([c.sum(), (c * c).sum(), nan, (~finite).sum().to(wide)])
    acc[3] -= acc[2]
    k = min(SAMPLES, t.numel())
    idx = torch.arange(k, device=t.device) * t.numel() // k
    x = t.reshape(1) if t.dim() == 0 else t
    coords = []
    for size in reversed(x.shape):  # unravel by hand: torch.unravel_index needs torch >= 2.2
        coords.append(idx % size)
        idx = idx // size
    return torch.cat([acc, x[tuple(reversed(coords))].to(wide)])


def fingerprints(tensors: list[Any]) -> list[tuple[float, float, int, int, tuple[float, ...]] | str]:
    """Usage: ``fingerprints([w, b])`` -> per tensor ``(sum, sumsq, nan, inf, samples)`` or why not.

    Computed on each tensor's device; one transfer (one sync) per device for the whole list. Tensors of
    at most ``SMALL`` elements go in batches of one device and dtype (``fingerprint_batch``).
    """
    out: list[Any] = [None] * len(tensors)
    pending: dict[Any, list[tuple[Any, Any]]] = {}  # device -> (index or batch, stats vector or head)
    small: dict[tuple[Any, Any], list[tuple[int, Any]]] = {}
    for i, t in enumerate(tensors):
        t = _prepare(t)
        if isinstance(t, str):
            out[i] = t
        elif t.numel() <= SMALL:
            small.setdefault((t.device, t.dtype), []).append((i, t))
        else:
            _one(i, t, pending, out)
    for group in small.values():
        for start, stop in _batches([t.numel() for _, t in group]):
            batch = group[start:stop]
            try:
                head, samples, ks = batch_stats([t for _, t in batch], _wide(batch[0][1].device), SAMPLES)
            except (RuntimeError, TypeError):  # fall back to one tensor at a time, each with its reason
                for i, t in batch:
                    _one(i, t, pending, out)
                continue
            pending.setdefault(head.device, []).append(([i for i, _ in batch], (head.reshape(-1), samples, ks,
                                                                              [t for _, t in batch])))
    again: dict[Any, list[tuple[int, Any]]] = {}
    _read(pending, out, again)
    if again:  # a NaN or an Inf in a batched tensor (or a float64 square overflowed): counted one by one
        _read(again, out, {})
    return out


def _read(pending: dict, out: list, again: dict) -> None:
    """One transfer per device; a batched tensor whose sums are not finite goes to ``again``."""
    import torch

    for items in pending.values():
        flat = torch.cat([v for _, v in _vectors(items)]).cpu().tolist()
        pos = 0
        for i, v in items:
            if isinstance(i, int):
                vals, pos = flat[pos:pos + v.numel()], pos + v.numel()
                out[i] = (vals[0], vals[1], int(vals[2]), int(vals[3]), tuple(vals[4:]))
                continue
            tensors, ks = v[3], v[2]
            head, pos = flat[pos:pos + 2 * len(i)], pos + 2 * len(i)
            for n, (index, k) in enumerate(zip(i, ks)):
                total, squares = head[2 * n], head[2 * n + 1]
                if math.isfinite(total) and math.isfinite(squares):
                    out[index] = (total, squares, 0, 0, tuple(flat[pos:pos + k]))
                else:
                    _one(index, tensors[n], again, out)
                pos += k


def _one(i: int, t: Any, pending: dict, out: list) -> None:
    try:
        pending.setdefault(t.device, []).append((i, _stats(t)))
    except (RuntimeError, TypeError) as exc:
        out[i] = f"cannot fingerprint: {str(exc).splitlines()[0][:80]}"


def _vectors(items: list) -> list:
    """Each pending item's tensors, in the order ``fingerprints`` reads them back."""
    found = []
    for i, v in items:
        if isinstance(i, int):
            found.append((i, v))
        else:
            found.extend([(None, v[0]), (None, v[1])])
    return found


def _batches(sizes: list[int]) -> list[tuple[int, int]]:
    """``[(start, stop)]`` runs of consecutive tensors holding at most about ``BATCH`` elements each."""
    runs, start, total = [], 0, 0
    for n, size in enumerate(sizes):
        if total and total + size > BATCH:
            runs.append((start, n))
            start, total = n, 0
        total += size
    if start < len(sizes):
        runs.append((start, len(sizes)))
    return runs


def _exact_distances(pairs: list[tuple[Any, Any]]) -> list[tuple[float, float, int]]:
    """Per pair ``(‖b − a‖, ‖a‖, elements that differ)`` over finite values, on the device; syncs at the end."""
    import torch

    results: list[Any] = []
    for a, b in pairs:
        wide = _wide(a.device)
        acc = torch.zeros(3, dtype=wide, device=a.device)
        for pa, pb in zip(_rows(a), _rows(b.to(a.device))):
            x, y = pa.to(wide), pb.to(wide)
            differ = ((x != y) & ~(torch.isnan(x) & torch.isnan(y))).sum().to(wide)
            d = torch.where(torch.isfinite(y - x), y - x, 0.0)
            x = torch.where(torch.isfinite(x), x, 0.0)
            acc += torch.stack([(d * d).sum(), (x * x).sum(), differ])
        results.append(acc)
    return [(math.sqrt(m), math.sqrt(n), int(c)) for m, n, c in (r.cpu().tolist() for r in results)]


def free_bytes(device: str) -> int | None:
    """Free memory on ``device`` (CUDA: ``mem_get_info``; CPU: ``MemAvailable``), None when unknown."""
    try:
        if device.startswith("cuda"):
            import torch

            return int(torch.cuda.mem_get_info(torch.device(device))[0])
        with open("/proc/meminfo") as fh:
            available = [int(line.split()[1]) * 1024 for line in fh if line.startswith("MemAvailable:")]
        return available[0] if device == "cpu" and available else None
    except (OSError, RuntimeError, ValueError, IndexError):
        return None
