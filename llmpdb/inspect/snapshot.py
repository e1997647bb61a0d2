"""Fingerprints of a model's parameters, buffers and grads, and what changed between two of them.

Usage::

    before = take_snapshot(model, name="step0")            # cheap: statistics computed on each device
    ...                                                     # loss.backward(); optimizer.step()
    diff = diff_with_model(before, model)                  # SnapDiff: changed / unchanged (why) / NaN
    diff = compare_snapshots(before, take_snapshot(model))
    dropped = trim_snapshots(store, limit=16, max_bytes=2**32)   # oldest first out, the newest kept

A fingerprint holds, per tensor, the float64 sum and sum of squares of its finite values, its NaN and Inf
counts and up to ``SAMPLES`` strided sample values. They are computed on the tensor's device in bounded
chunks, and every device is synchronised once per snapshot. ``exact=True`` keeps a copy of each tensor
on its device instead (refused when free memory is short), so relative L2 changes are exact; otherwise
they are estimated from the samples. This reads tensor values: it runs only when the user asks.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..units import mib
from .fingerprint import SAMPLES, _exact_distances, fingerprints, free_bytes
from .kinds import is_module, type_defines

__all__ = ["SAMPLES", "Change", "NonFinite", "SnapDiff", "Snapshot", "SnapshotError", "TensorPrint", "Unchanged",
           "compare_snapshots", "diff_with_model", "fingerprints", "free_bytes", "take_snapshot", "trim_snapshots"]



class SnapshotError(ValueError):
    """A snapshot that cannot be taken or compared: one line for the user."""


@dataclass
class TensorPrint:
    """One tensor's fingerprint; ``copy`` is an exact copy (``exact``) or the live tensor (``live``)."""

    shape: tuple[int, ...]
    dtype: str
    device: str
    numel: int
    requires_grad: bool = False
    is_param: bool = True
    has_grad: bool = False
    total: float = 0.0
    sumsq: float = 0.0
    nan: int = 0
    inf: int = 0
    samples: tuple[float, ...] = ()
    skipped: str | None = None
    copy: Any = None

    @property
    def finite(self) -> bool:
        return self.nan == 0 and self.inf == 0

    def same_values(self, other: "TensorPrint") -> bool:
        """Equal fingerprints (NaN equals NaN)."""
        mine = (self.total, self.sumsq, self.nan, self.inf, *self.samples)
        theirs = (other.total, other.sumsq, other.nan, other.inf, *other.samples)
        return len(mine) == len(theirs) and all(a == b or (a != a and b != b) for a, b in zip(mine, theirs))


@dataclass
class Snapshot:
    """Fingerprints of one model at one stop. ``tensors``: parameters and buffers; ``grads``: ``.grad``."""

    name: str
    label: str
    stop: int
    mode: str
    tensors: dict[str, TensorPrint]
    grads: dict[str, TensorPrint]
    expr: str | None = None
    model_ref: Any = None
    copied_bytes: int = 0

    def model(self) -> Any:
        """The snapshotted model if it is still alive, else None."""
        return self.model_ref() if self.model_ref is not None else None

    @property
    def nbytes(self) -> int:
        """Memory this snapshot keeps: ``--exact`` copies plus about 8 KiB of samples per fingerprint."""
        return self.copied_bytes + (len(self.tensors) + len(self.grads)) * (SAMPLES * 32 + 400)


@dataclass(frozen=True)
class Change:
    """A tensor whose values changed: ``rel_l2`` = ‖after − before‖ / ‖before‖ (None when ‖before‖ = 0).

    ``how``: ``"exact"``, ``"sampled"`` (from the strided samples), ``"lower bound"`` (from the norms, when
    no sample moved) or ``"unknown"``.
    """

    name: str
    rel_l2: float | None
    abs_l2: float | None
    how: str


@dataclass(frozen=True)
class Unchanged:
    """A tensor whose values did not change, and the likely ``reason`` (``"frozen (requires_grad=False)"``)."""

    name: str
    reason: str


@dataclass(frozen=True)
class NonFinite:
    """A tensor (or ``name.grad``) holding NaN/Inf now; ``became``: it held none before."""

    name: str
    nan: int
    inf: int
    became: bool


@dataclass
class SnapDiff:
    """What changed between two snapshots (or a snapshot and the model now)."""

    before: str
    after: str
    before_stop: int
    after_stop: int
    label: str
    how: str
    changed: list[Change] = field(default_factory=list)
    unchanged: list[Unchanged] = field(default_factory=list)
    nonfinite: list[NonFinite] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    reshaped: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    grads: dict[str, int] = field(default_factory=dict)
    order: list[str] = field(default_factory=list, repr=False)

    @property
    def total(self) -> int:
        return len(self.changed) + len(self.unchanged)


def _named_tensors(model: Any) -> tuple[dict[str, Any], dict[str, bool]]:
    """Name -> tensor (parameters then buffers, each once) and name -> is-parameter."""
    tensors: dict[str, Any] = {}
    is_param: dict[str, bool] = {}
    if is_module(model) and type_defines(model, "named_parameters"):  # by type: no __getattr__/__class__ runs
        for name, p in model.named_parameters():
            tensors[name], is_param[name] = p, True
        named_buffers = getattr(model, "named_buffers", None)
        for name, b in named_buffers() if callable(named_buffers) else ():
            if name not in tensors:
                tensors[name], is_param[name] = b, False
    elif issubclass(type(model), Mapping):
        import torch

        for name, t in model.items():
            if type(name) is str and issubclass(type(t), torch.Tensor):
                tensors[name] = t
                is_param[name] = bool(getattr(t, "requires_grad", False))
    else:
        raise SnapshotError(f"a {type(model).__name__} is not a module or a dict of tensors")
    if not tensors:
        raise SnapshotError(f"{type(model).__name__} has no parameters or buffers")
    return tensors, is_param


def _local(t: Any) -> Any:
    """A DTensor's local shard (statistics on the global tensor would need collectives)."""
    if type(t).__name__ != "DTensor":  # by type first: a missing attribute of a tensor costs a raised error
        return t
    to_local = getattr(t, "to_local", None)
    return to_local() if callable(to_local) else t


def _shell(t: Any, is_param: bool, requires_grad: bool) -> TensorPrint:
    return TensorPrint(
        shape=tuple(int(d) for d in t.shape), dtype=str(t.dtype).removeprefix("torch."), device=str(t.device),
        numel=int(t.numel()), requires_grad=requires_grad, is_param=is_param,
    )


def _fill(prints: list[TensorPrint], tensors: list[Any], mode: str, keep: int) -> int:
    """Fingerprint in place; keep copies (``exact``) or references (``live``) of the first ``keep``."""
    copied = 0
    for i, (tp, t, st) in enumerate(zip(prints, tensors, fingerprints(tensors))):
        if isinstance(st, str):
            tp.skipped = st
            continue
        tp.total, tp.sumsq, tp.nan, tp.inf, tp.samples = st
        if i < keep and mode == "exact":
            tp.copy = t.detach().clone()
            copied += t.numel() * t.element_size()
        elif i < keep and mode == "live":
            tp.copy = t.detach()
    return copied


def _check_memory(tensors: list[Any]) -> None:
    need: dict[str, int] = {}
    for t in tensors:
        if t.device.type != "meta":
            need[str(t.device)] = need.get(str(t.device), 0) + t.numel() * t.element_size()
    for device, nbytes in need.items():
        free = free_bytes(device)
        if free is not None and nbytes > 0.8 * free:
            raise SnapshotError(
                f"--exact needs {mib(nbytes, 0)} on {device} but {mib(free, 0)} are free; "
                "take a fingerprint snapshot (without --exact)"
            )


def take_snapshot(model: Any, *, name: str = "snap", mode: str = "fingerprint", stop: int = 0,
                  expr: str | None = None, exact: bool = False) -> Snapshot:
    """Usage: ``take_snapshot(model, name="before", exact=False)`` -> ``Snapshot``.

    ``mode``: ``"fingerprint"`` (default), ``"exact"`` (also keep copies; same as ``exact=True``) or
    ``"live"`` (keep references to the live tensors: the "now" side of ``diff_with_model``).
    """
    import torch

    mode = "exact" if exact else mode
    named, is_param = _named_tensors(model)
    with torch.no_grad():
        names = list(named)
        tensors = [_local(named[n]).detach() for n in names]
        if mode == "exact":
            _check_memory(tensors)
        prints = [_shell(t, is_param[n], bool(getattr(named[n], "requires_grad", False)))
                  for n, t in zip(names, tensors)]
        grad_names, grad_tensors = [], []
        for n, tp in zip(names, prints):
            g = getattr(named[n], "grad", None) if is_param[n] else None
            if g is not None:
                tp.has_grad = True
                grad_names.append(n)
                grad_tensors.append(_local(g).detach())
        grad_prints = [_shell(g, False, False) for g in grad_tensors]
        copied = _fill(prints + grad_prints, tensors + grad_tensors, mode, keep=len(prints))
    try:
        ref = weakref.ref(model)
    except TypeError:
        ref = None
    label = type(model).__name__
    return Snapshot(name, label, stop, mode, dict(zip(names, prints)), dict(zip(grad_names, grad_prints)),
                    expr, ref, copied)


def _unchanged_reason(before: TensorPrint, after: TensorPrint, grad: TensorPrint | None) -> str:
    if not after.is_param:
        return "buffer"
    if not after.requires_grad:
        return "frozen (requires_grad=False)"
    if grad is None and not before.has_grad:
        return "grad None"
    if grad is not None and grad.skipped is None and grad.sumsq == 0 and grad.finite:
        return "grad all zero"
    return "zero step (grad present: not in the optimizer? lr 0?)"


def _estimate(name: str, a: TensorPrint, b: TensorPrint) -> Change:
    pairs = [(x, y) for x, y in zip(a.samples, b.samples) if math.isfinite(x) and math.isfinite(y)]
    moved = math.sqrt(sum((y - x) ** 2 for x, y in pairs))
    base = math.sqrt(sum(x * x for x, _ in pairs))
    norm_a = math.sqrt(max(a.sumsq, 0.0))
    if moved > 0:
        abs_l2 = moved * math.sqrt(a.numel / max(len(pairs), 1))
        if len(pairs) == a.numel:
            return Change(name, moved / base if base else None, moved, "exact")
        return Change(name, moved / base if base else None, abs_l2, "sampled")
    bound = abs(math.sqrt(max(b.sumsq, 0.0)) - norm_a)
    if bound > 0:
        return Change(name, bound / norm_a if norm_a else None, bound, "lower bound")
    return Change(name, None, None, "unknown")


def _compare(a: Snapshot, b: Snapshot, after_name: str) -> SnapDiff:
    how = "exact" if a.mode == "exact" and b.mode in ("exact", "live") else "sampled"
    diff = SnapDiff(a.name, after_name, a.stop, b.stop, b.label, how, order=list(b.tensors))
    diff.removed = [n for n in a.tensors if n not in b.tensors]
    diff.added = [n for n in b.tensors if n not in a.tensors]
    exact_pairs: list[tuple[str, Any, Any]] = []
    for name, after in b.tensors.items():
        before = a.tensors.get(name)
        if before is None:
            continue
        if (before.shape, before.dtype) != (after.shape, after.dtype):
            diff.reshaped.append(name)
            continue
        if before.skipped or after.skipped:
            diff.skipped.append((name, before.skipped or after.skipped or ""))
            continue
        if after.nan or after.inf:
            diff.nonfinite.append(NonFinite(name, after.nan, after.inf, before.finite))
        if how == "exact" and before.copy is not None and after.copy is not None:
            exact_pairs.append((name, before.copy, after.copy))
        elif before.same_values(after):
            diff.unchanged.append(Unchanged(name, _unchanged_reason(before, after, b.grads.get(name))))
        else:
            diff.changed.append(_estimate(name, before, after))
    if exact_pairs:
        distances = _exact_distances([(x, y) for _, x, y in exact_pairs])
        for (name, _, _), (moved, base, differ) in zip(exact_pairs, distances):
            if differ == 0:
                reason = _unchanged_reason(a.tensors[name], b.tensors[name], b.grads.get(name))
                diff.unchanged.append(Unchanged(name, reason))
            else:
                rel = moved / base if base and moved else None
                diff.changed.append(Change(name, rel, moved if moved else None, "exact" if moved else "unknown"))
        order = {n: i for i, n in enumerate(b.tensors)}
        diff.changed.sort(key=lambda c: order[c.name])
        diff.unchanged.sort(key=lambda u: order[u.name])
    counts = {"appeared": 0, "cleared": 0, "changed": 0, "unchanged": 0}
    for name in dict.fromkeys([*a.grads, *b.grads]):
        ga, gb = a.grads.get(name), b.grads.get(name)
        if ga is None or gb is None:
            counts["appeared" if ga is None else "cleared"] += 1
        elif not (ga.skipped or gb.skipped):
            counts["unchanged" if ga.same_values(gb) else "changed"] += 1
        if gb is not None and not gb.skipped and (gb.nan or gb.inf):
            diff.nonfinite.append(NonFinite(name + ".grad", gb.nan, gb.inf, ga is None or ga.finite))
    diff.grads = {k: v for k, v in counts.items() if v}
    return diff


def compare_snapshots(before: Snapshot, after: Snapshot) -> SnapDiff:
    """Usage: ``compare_snapshots(snaps["a"], snaps["b"])``; exact when both kept copies."""
    return _compare(before, after, after.name)


def trim_snapshots(store: dict[str, Snapshot], *, limit: int, max_bytes: int) -> list[Snapshot]:
    """Usage: ``dropped = trim_snapshots(store, limit=16, max_bytes=4 << 30)``; oldest dropped first.

    ``store`` keeps insertion order (oldest first). Snapshots are removed until at most ``limit`` remain
    and they keep at most ``max_bytes`` (``Snapshot.nbytes``), but the newest is always kept.
    """
    dropped: list[Snapshot] = []
    while len(store) > 1 and (len(store) > max(limit, 1) or sum(s.nbytes for s in store.values()) > max_bytes):
        oldest = next(iter(store))
        dropped.append(store.pop(oldest))
    return dropped


def diff_with_model(before: Snapshot, model: Any, *, stop: int = 0) -> SnapDiff:
    """Usage: ``diff_with_model(snap, model)``; fingerprints the model now (live references if ``snap`` is exact)."""
    now = take_snapshot(model, name="now", mode="live" if before.mode == "exact" else "fingerprint", stop=stop)
    return _compare(before, now, "now")
