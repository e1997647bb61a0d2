"""Records of a ``diverge`` run, the default tolerances, and the comparison of two tensors (reads values).

Usage::

    rtol, atol = default_tolerance(torch.float32, torch.bfloat16)   # the looser dtype's: (0.016, 0.01)
    diff = compare_tensors("output[0]", ref, other, rtol=rtol, atol=atol)
    diff.max_abs, diff.max_rel, diff.beyond, diff.count     # beyond: some value fails |a-b| <= atol + rtol*|a|
    CallCompare(order, path, class_name, outputs=(diff, ...), inputs=(...))   # one module call of both runs
    DivergeReport(...)                                                          # what the command renders

The first run is the reference: relative errors are ``|a - b| / |a|`` with ``a`` from the first run, as
``torch.testing`` reports them (a zero reference with a nonzero difference gives ``inf``). Both tensors
are compared in float32 (float64 when either is float64; exact for integers and bools), on the first
run's device. NaN in both runs at the same place counts as equal, as do equal infinities.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import Any

from .safe import safe_getattr, short_dtype
from .shape_summary import tensor_shape

__all__ = ["TensorDiff", "CallCompare", "DivergeReport", "default_tolerance", "compare_tensors", "TOLERANCES"]

# (rtol, atol) per dtype, looser than torch.testing's one-op defaults for the half types: a whole network's
# accumulated rounding is compared, not one op.
TOLERANCES: dict[str, tuple[float, float]] = {
    "f64": (1e-7, 1e-7), "f32": (1.3e-6, 1e-5), "f16": (1e-3, 1e-3), "bf16": (1.6e-2, 1e-2),
    "f8e4m3": (0.125, 0.125), "f8e5m2": (0.25, 0.25),
}
_EXACT = (0.0, 0.0)


@dataclass(frozen=True)
class TensorDiff:
    """One tensor of both runs: ``where`` (``output[0]``, ``input hidden_states``), the largest errors."""

    where: str
    max_abs: float | None
    max_rel: float | None
    beyond: bool
    count: int = 0          # values beyond the tolerance
    numel: int = 0
    rtol: float = 0.0
    atol: float = 0.0
    note: str = ""          # "shape (1, 7) vs (1, 8)", "only in run 1", "3 NaN in run 2 only"
    masked_beyond: int = 0  # values beyond the tolerance at positions the attention mask masks (not counted)


@dataclass(frozen=True)
class CallCompare:
    """One module call compared: its outputs (and its inputs, when they were recorded)."""

    order: int              # the call's rank in the order calls started
    path: str
    class_name: str
    outputs: tuple[TensorDiff, ...]
    inputs: tuple[TensorDiff, ...] = ()
    enclosing: tuple[str, str] | None = None   # (path, class) of the module running when this one was called

    @property
    def beyond(self) -> bool:
        return any(d.beyond for d in self.outputs)

    @property
    def first_beyond(self) -> TensorDiff | None:
        return next((d for d in self.outputs if d.beyond), None)

    @property
    def inputs_beyond(self) -> TensorDiff | None:
        return next((d for d in self.inputs if d.beyond), None)

    def largest(self, which: str = "abs", inputs: bool = False) -> float | None:
        values = [d.max_abs if which == "abs" else d.max_rel for d in (self.inputs if inputs else self.outputs)]
        values = [v for v in values if v is not None]
        return max(values) if values else None


@dataclass
class DivergeReport:
    """What ``diverge`` found: the compared calls in the order their outputs were produced, up to the first
    that differs beyond the tolerance (``first``), and everything that limits the answer."""

    expr: str
    setting: str
    variant: str                      # "a bfloat16 copy of LlamaForCausalLM (1.2 MiB)", ...
    rows: list[CallCompare] = field(default_factory=list)
    first: CallCompare | None = None
    calls_first: int = 0              # module calls of the first run
    calls_second: int = 0             # ... of the second (counted up to the stop)
    recorded: int = 0                 # calls of the first run whose outputs were recorded
    budget: int = 0                   # bytes allowed for the records
    used: int = 0                     # bytes the records took
    over_budget_at: int | None = None  # the call at which the records stopped (memory)
    structure: str | None = None      # "call 12 is ... in run 1 but ... in run 2"
    tolerance: str = ""               # "per dtype (f32: rtol 1.3e-06, atol 1e-05)" or "rtol 0.01, atol 0.001"
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _rank(dtype: Any) -> int:
    order = ["f64", "f32", "f16", "bf16", "f8e4m3", "f8e5m2"]
    name = short_dtype(dtype)
    return order.index(name) if name in order else -1


def default_tolerance(a_dtype: Any, b_dtype: Any) -> tuple[float, float]:
    """Usage: ``default_tolerance(torch.float32, torch.bfloat16)`` -> ``(0.016, 0.01)``: the looser of the
    two dtypes' tolerances; integers and bools compare exactly (``(0.0, 0.0)``)."""
    names = [short_dtype(a_dtype), short_dtype(b_dtype)]
    known = [n for n in names if n in TOLERANCES]
    if not known:
        return _EXACT if all(n.startswith(("i", "u", "bool")) for n in names) else TOLERANCES["f32"]
    return TOLERANCES[max(known, key=lambda n: _rank(n))]


def _compute_dtype(torch, a, b):
    if a.is_complex() or b.is_complex():
        return torch.complex128
    if a.is_floating_point() or b.is_floating_point():
        return torch.float64 if torch.float64 in (a.dtype, b.dtype) else torch.float32
    return torch.float64


def compare_tensors(where: str, a, b, *, rtol: float | None = None, atol: float | None = None,
                    attends=None) -> TensorDiff:
    """Usage: ``compare_tensors("output[0]", first_run, second_run)``; reads both tensors' values (a few
    reductions on ``a``'s device). ``rtol``/``atol`` default to ``default_tolerance`` of the two dtypes.
    ``attends`` (a bool ``(batch, seq)`` tensor, False at padding): a tensor whose leading dims are that
    shape is compared where it is True; values beyond the tolerance elsewhere are counted apart
    (``masked_beyond``), since what a kernel leaves at a padded position is no result."""
    torch = sys.modules["torch"]
    d_rtol, d_atol = default_tolerance(a.dtype, b.dtype)
    rtol = d_rtol if rtol is None else rtol
    atol = d_atol if atol is None else atol
    if safe_getattr(a, "is_meta", False) or safe_getattr(b, "is_meta", False):
        return TensorDiff(where, None, None, False, rtol=rtol, atol=atol, note="meta tensor: no values")
    if tuple(a.shape) != tuple(b.shape):
        return TensorDiff(where, None, None, True, numel=a.numel(), rtol=rtol, atol=atol,
                          note=f"shape {tensor_shape(a)} vs {tensor_shape(b)}")
    if a.numel() == 0:
        return TensorDiff(where, 0.0, 0.0, False, rtol=rtol, atol=atol)
    dtype = _compute_dtype(torch, a, b)
    x = a.detach().to(dtype)
    y = b.detach().to(device=x.device, dtype=dtype)
    both_nan = torch.isnan(x) & torch.isnan(y)
    same = (x == y) | both_nan
    diff = torch.where(same, torch.zeros((), dtype=x.real.dtype if x.is_complex() else dtype, device=x.device),
                       (x - y).abs())
    diff = torch.nan_to_num(diff, nan=math.inf, posinf=math.inf)   # NaN on one side only, or inf - inf
    ref = x.abs()
    ref = torch.where(torch.isnan(ref), torch.zeros_like(ref), ref)
    bad = (diff > atol + rtol * ref) | torch.isinf(diff)   # an inf difference is never within tolerance
    masked_beyond = 0
    if attends is not None and a.dim() >= 2 and tuple(a.shape[:2]) == tuple(attends.shape):
        keep = attends.to(x.device).reshape(tuple(attends.shape) + (1,) * (a.dim() - 2)).expand(a.shape)
        masked_beyond = int((bad & ~keep).sum())
        bad, diff = bad & keep, torch.where(keep, diff, torch.zeros_like(diff))
    count = int(bad.sum())
    max_abs = float(diff.max())
    rel = torch.where(diff == 0, torch.zeros_like(diff), torch.where(torch.isinf(diff), diff, diff / ref))
    max_rel = float(rel.max())
    note = ""
    only = int((torch.isnan(x) ^ torch.isnan(y)).sum())
    if only:
        note = f"{only} NaN in one run only"
    if masked_beyond:
        note = ", ".join(filter(None, [note, f"{masked_beyond} values differ at masked positions only"]))
    return TensorDiff(where, max_abs, max_rel, count > 0, count=count, numel=a.numel(), rtol=rtol, atol=atol,
                      note=note, masked_beyond=masked_beyond)
