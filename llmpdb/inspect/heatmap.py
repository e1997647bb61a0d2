"""Values of a tensor for ``show``: a 2-D grid block-averaged to fit, or a histogram of a 1-D one.

Usage::

    grid = heat_grid(attn[0, 2], rows=40, cols=80)   # HeatGrid: cells (float / MASKED / NAN / POSINF)
    hist = value_histogram(x, bins=10)               # Histogram: edges, counts, nan/inf/masked counts
    check_drawable(x, "x", dims=2)                   # a ValueError with one clear line when x cannot be drawn

Values are read (the user asked for them), computed on the tensor's own device with torch ops
(``index_add_``, ``amin``/``amax``, ``histc``) on a detached copy under ``torch.no_grad()``, then the small
result is moved to the CPU (one transfer for a grid, two for a histogram); grad mode and RNG are left as they were. A cell is ``MASKED`` when every
value in its block is ``-inf`` or the dtype's minimum (how attention masks mark what is not attended),
``NAN`` when any value in it is NaN, ``POSINF`` when every unmasked value is ``+inf``; otherwise the mean
of its finite, unmasked values. Booleans count as 0/1.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from ..units import format_shape
from .safe import no_torch_function, safe_getattr, short_dtype

__all__ = ["HeatGrid", "Histogram", "MASKED", "NAN", "POSINF", "check_drawable", "heat_grid", "value_histogram"]

MASKED, NAN, POSINF = "masked", "nan", "+inf"


@dataclass(frozen=True)
class HeatGrid:
    """``cells[r][c]``: a float or MASKED/NAN/POSINF; cell ``r`` covers rows ``row_edges[r]`` to
    ``row_edges[r+1] - 1`` of the tensor (the same for columns); ``low``/``high``: the finite cell range."""

    cells: tuple[tuple[Any, ...], ...]
    shape: tuple[int, int]
    row_edges: tuple[int, ...]
    col_edges: tuple[int, ...]
    low: float | None
    high: float | None
    dtype: str
    masked: int = 0
    nan: int = 0
    posinf: int = 0


@dataclass(frozen=True)
class Histogram:
    """``counts[i]`` values in ``[edges[i], edges[i+1])`` (the last bin closed); special values apart."""

    edges: tuple[float, ...]
    counts: tuple[int, ...]
    total: int
    dtype: str
    shape: tuple[int, ...]
    masked: int = 0
    nan: int = 0
    posinf: int = 0


def _torch():
    return sys.modules["torch"]


def check_drawable(t: Any, expr: str, *, dims: tuple[int, ...] = (1, 2)) -> None:
    """Usage: ``check_drawable(x, "x")``; raises ValueError (one line, saying how to slice) unless ``x`` is a
    dense real tensor with data of a dimension in ``dims``."""
    torch = sys.modules.get("torch")
    if torch is None or not issubclass(type(t), torch.Tensor):
        raise ValueError(f"{expr} is not a tensor (a {type(t).__name__}): show draws tensors")
    with no_torch_function():
        if safe_getattr(t, "is_meta", False):
            raise ValueError(f"{expr} is a meta tensor {format_shape(tuple(t.shape))}: it has no values to draw")
        names = {c.__name__ for c in type(t).__mro__}
        if names & {"FakeTensor", "FunctionalTensor"}:
            raise ValueError(f"{expr} is a fake tensor: it has no values to draw")
        if safe_getattr(t, "is_nested", False):  # its layout reads strided; it has no to_dense()
            raise ValueError(f"{expr} is a nested tensor (ragged): show {expr}[0], or "
                             f"show torch.nested.to_padded_tensor({expr}, 0.0)")
        if str(t.layout) != "torch.strided":
            raise ValueError(f"{expr} is a {str(t.layout).replace('torch.', '')} tensor: show {expr}.to_dense()")
        if t.is_quantized:
            raise ValueError(f"{expr} is quantized {short_dtype(t.dtype)}: show {expr}.dequantize()")
        if t.is_complex():
            raise ValueError(f"{expr} is {short_dtype(t.dtype)}: show {expr}.abs() or {expr}.real")
        shape = tuple(int(s) for s in t.shape)
    if len(shape) not in dims:
        if len(shape) == 0:
            raise ValueError(f"{expr} is a 0-d tensor (one value): p {expr}.item()")
        index = ", ".join(["0"] * (len(shape) - 2))
        raise ValueError(f"{expr} is {len(shape)}-d {format_shape(shape)}: show a 2-d slice, "
                         f"e.g. show {expr}[{index}] (or --hist for the values of all of it)")
    if 0 in shape:
        raise ValueError(f"{expr} is empty {format_shape(shape)}: nothing to draw")


def _special_masks(x: Any, dtype: Any):
    """(values as float, masked, nan, posinf) boolean tensors on x's device."""
    torch = _torch()
    if not dtype.is_floating_point:  # bool as 0/1, integers exactly (float64 holds them up to 2**53)
        v = x.to(torch.float32 if dtype == torch.bool else torch.float64)
        none = torch.zeros_like(v, dtype=torch.bool)
        return v, none, none, none
    floor = torch.finfo(dtype).min
    masked = torch.isneginf(x) | (x == floor)
    nan = torch.isnan(x)
    posinf = torch.isposinf(x)
    return x.to(torch.float64 if dtype == torch.float64 else torch.float32), masked, nan, posinf


def _flat(rows: list[list[float]]) -> list[float]:
    return [value for row in rows for value in row]


def _edges(n: int, parts: int) -> tuple[int, ...]:
    """Where each cell's rows start: index j goes to cell (j * parts) // n, so cell i starts at
    ceil(i * n / parts) (a floor would label a row with the cell before the one that averages it)."""
    return tuple(-((-i * n) // parts) for i in range(parts + 1))


def heat_grid(t: Any, *, rows: int, cols: int) -> HeatGrid:
    """Usage: ``heat_grid(mask, rows=30, cols=80)``; a 2-D tensor block-averaged to at most rows × cols."""
    torch = _torch()
    with no_torch_function(), torch.no_grad():
        x = t.detach()
        h, w = int(x.shape[0]), int(x.shape[1])
        r, c = max(1, min(h, rows)), max(1, min(w, cols))
        v, masked, nan, posinf = _special_masks(x, x.dtype)
        valid = ~(masked | nan | posinf)
        rbin = (torch.arange(h, device=x.device) * r) // h
        cbin = (torch.arange(w, device=x.device) * c) // w

        def pool(m):
            m = m.to(v.dtype)
            by_row = torch.zeros((r, w), dtype=v.dtype, device=x.device).index_add_(0, rbin, m)
            return torch.zeros((r, c), dtype=v.dtype, device=x.device).index_add_(1, cbin, by_row)

        sums = pool(torch.where(valid, v, torch.zeros((), dtype=v.dtype, device=x.device)))
        counts, n_masked, n_nan, n_posinf = pool(valid), pool(masked), pool(nan), pool(posinf)
        means = sums / counts.clamp(min=1)
        table = torch.stack([means, counts, n_masked, n_nan, n_posinf]).cpu().tolist()  # the one transfer
    finite = [mean for mean, count in zip(_flat(table[0]), _flat(table[1])) if count]
    low, high = (min(finite), max(finite)) if finite else (None, None)
    totals = tuple(int(round(sum(_flat(table[k])))) for k in (2, 3, 4))
    cells = []
    for i in range(r):
        line = []
        for j in range(c):
            mean, count, m, n, p = (table[k][i][j] for k in range(5))
            line.append(NAN if n else mean if count else POSINF if p else MASKED)
        cells.append(tuple(line))
    return HeatGrid(tuple(cells), (h, w), _edges(h, r), _edges(w, c), low, high, short_dtype(t.dtype), *totals)


def value_histogram(t: Any, *, bins: int) -> Histogram:
    """Usage: ``value_histogram(x, bins=10)``; counts of the finite, unmasked values of any-dimensional ``x``."""
    torch = _torch()
    with no_torch_function(), torch.no_grad():
        x = t.detach().reshape(-1)
        v, masked, nan, posinf = _special_masks(x, x.dtype)
        valid = ~(masked | nan | posinf)
        kept = v[valid]
        totals = (int(masked.sum()), int(nan.sum()), int(posinf.sum()))
        if kept.numel() == 0:
            return Histogram((), (), 0, short_dtype(t.dtype), tuple(int(s) for s in t.shape), *totals)
        low, high = float(kept.amin()), float(kept.amax())
        if low == high:
            edges, counts = (low, high), [int(kept.numel())]
        else:
            counts = torch.histc(kept.to(torch.float64 if kept.dtype == torch.float64 else torch.float32),
                                 bins=bins, min=low, max=high).cpu().tolist()
            counts = [int(n) for n in counts]
            edges = tuple(low + (high - low) * i / bins for i in range(bins + 1))
    return Histogram(tuple(edges), tuple(counts), int(kept.numel()), short_dtype(t.dtype),
                     tuple(int(s) for s in t.shape), *totals)
