"""Where the memory in sight goes: CUDA counters, the largest tensors, models, KV caches, optimizers.

Usage::

    cuda = cuda_memory()                          # None when CUDA is not initialised (never initialises it)
    big = largest_tensors(frame.f_locals, top=10)  # TensorBytes rows, one per storage, largest first
    held = model_holdings([("model", m)]) + cache_holdings([("cache", c)]) + optimizer_holdings(locals)
    report = MemoryReport(cuda, big, held)

Metadata only: a tensor's bytes are ``numel × element_size`` (its storage's ``nbytes`` when it has one,
so a view and the tensor it views count once, under the first path the walk reached); tensors that hold
no memory count 0 bytes and say what they are (``no_memory_kind``: ``meta``, ``fake`` for a ``FakeTensor``,
``functional`` for a ``FunctionalTensor``), and their storage is never asked for (a FakeTensor's
``data_ptr`` warns). The tensors come from the walk of ``shapes`` (``inspect.tensors``): modules
and optimizers are not entered there, their parameters, gradients and state are counted here instead.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..units import human_bytes, human_count
from .kinds import instance_dict, is_module
from .kv import inspect_cache
from .safe import is_tensor, no_torch_function, safe_getattr, short_dtype, type_name
from .tensors import _shape, _Walker  # the walk of `shapes`, reused

__all__ = ["DeviceMemory", "TensorBytes", "Holding", "MemoryReport", "cuda_memory", "storage_key",
           "tensor_bytes", "no_memory_kind", "largest_tensors", "model_holdings", "cache_holdings",
           "optimizer_holdings", "find_optimizers"]


@dataclass(frozen=True)
class DeviceMemory:
    """One CUDA device's counters (``torch.cuda.memory_allocated/reserved/max_memory_allocated``)."""

    device: str
    allocated: int
    reserved: int
    peak: int


@dataclass(frozen=True)
class TensorBytes:
    """One storage in the frame: the first path that reached it, its bytes, the other paths sharing it."""

    path: str
    shape: tuple[int | str, ...]
    dtype: str
    device: str
    nbytes: int
    meta: bool = False  # holds no memory (``label`` says why: meta, fake, functional)
    shared: tuple[str, ...] = ()
    label: str = ""


@dataclass(frozen=True)
class Holding:
    """A model, cache or optimizer: ``kind`` (model / kv cache / optimizer), its name, bytes (None when it
    could not be read: the detail says why), a detail line."""

    kind: str
    name: str
    nbytes: int | None
    detail: str


@dataclass(frozen=True)
class MemoryReport:
    """``cuda`` is None when CUDA is not in use; ``tensors`` the top rows of ``storages`` distinct ones."""

    cuda: tuple[DeviceMemory, ...] | None
    tensors: tuple[TensorBytes, ...]
    holdings: tuple[Holding, ...] = ()
    storages: int = 0
    total_bytes: int = 0
    notes: tuple[str, ...] = field(default=())


def cuda_memory() -> tuple[DeviceMemory, ...] | None:
    """Usage: ``cuda_memory()``; per-device counters, or None when torch is not loaded or CUDA is not
    initialised (``torch.cuda.is_initialized()`` is asked, nothing that would initialise it)."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None) if torch is not None else None
    if cuda is None or not cuda.is_initialized():
        return None
    return tuple(DeviceMemory(f"cuda:{i}", int(cuda.memory_allocated(i)), int(cuda.memory_reserved(i)),
                              int(cuda.max_memory_allocated(i))) for i in range(cuda.device_count()))


_NO_MEMORY = (("torch._subclasses.fake_tensor", "FakeTensor", "fake"),
              ("torch._subclasses.functional_tensor", "FunctionalTensor", "functional"))


def no_memory_kind(t: Any) -> str | None:
    """Usage: ``no_memory_kind(t)`` -> ``"fake"``, ``"functional"``, ``"meta"`` for a tensor that holds no
    memory of its own, else None. Classes are torch's own, looked up in ``sys.modules`` (never imported),
    tested on ``type(t)``: nothing of the tensor runs."""
    kind = type(t)
    for module, name, label in _NO_MEMORY:
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type) and issubclass(kind, cls):
            return label
    return "meta" if safe_getattr(t, "is_meta", False) else None


def _is_meta(t: Any) -> bool:
    return no_memory_kind(t) is not None


def tensor_bytes(t: Any) -> int:
    """Usage: ``tensor_bytes(t)``; ``numel × element_size`` (0 for a tensor that holds no memory: meta,
    fake, functional), never reads data."""
    if _is_meta(t):
        return 0
    with no_torch_function():
        try:
            return int(t.numel()) * int(t.element_size())
        except Exception:  # a tensor subclass without numel: nothing counted rather than a guess
            return 0


def storage_key(t: Any) -> tuple | None:
    """Usage: ``storage_key(t)`` -> ``(device, data_ptr, nbytes)`` of its storage (metadata), or None for
    meta, fake, functional, sparse, nested and storage-less tensors (each counts on its own)."""
    if _is_meta(t) or str(safe_getattr(t, "layout", "torch.strided")) != "torch.strided":
        return None
    with no_torch_function():
        try:
            storage = t.untyped_storage()
            return (str(t.device), int(storage.data_ptr()), int(storage.nbytes()))
        except Exception:  # FakeTensor, nested or wrapper subclasses: no storage to share
            return None


class _CollectingWalker(_Walker):
    """The walk of ``shapes``, keeping each tensor object with its path (in walk order)."""

    def __init__(self) -> None:
        super().__init__(max_depth=6, max_items=10**6, stats=False)
        self.found: list[tuple[str, Any]] = []
        self.ids: set[int] = set()

    def add_tensor(self, t: Any, path: str) -> None:
        self.tensors += 1
        if id(t) not in self.ids:
            self.ids.add(id(t))
            self.keep.append(t)
            self.found.append((path, t))


def largest_tensors(locals_: Mapping[str, Any], *, top: int = 10) -> tuple[list[TensorBytes], int, int, list[str]]:
    """Usage: ``rows, storages, total, notes = largest_tensors(frame.f_locals, top=10)``.

    Every tensor reachable from the locals (the walk of ``shapes``), grouped by storage: ``rows`` are the
    ``top`` largest groups (largest first, ties in walk order), ``storages`` how many groups, ``total``
    their bytes; ``notes`` what the walk could not read or left out."""
    walker = _CollectingWalker()
    for name, value in list(locals_.items()):
        if isinstance(name, str) and name.startswith("__") and name.endswith("__"):
            continue
        walker.visit(value, str(name), 0)
    groups: dict[Any, list[tuple[str, Any]]] = {}
    for path, t in walker.found:
        key = storage_key(t)
        groups.setdefault(key if key is not None else ("tensor", id(t)), []).append((path, t))
    rows = []
    for members in groups.values():
        path, first = members[0]
        label = no_memory_kind(first) or ""
        meta = bool(label)
        sizes = [tensor_bytes(t) for _, t in members]
        key = storage_key(first)
        nbytes = 0 if meta else max(sizes + ([key[2]] if key is not None else []))
        with no_torch_function():
            shape = _shape(first)
        device = "meta" if label == "meta" else str(safe_getattr(first, "device", "?"))
        rows.append(TensorBytes(path, shape, short_dtype(safe_getattr(first, "dtype", "?")), device, nbytes, meta,
                                tuple(p for p, _ in members[1:]), label))
    order = sorted(range(len(rows)), key=lambda i: -rows[i].nbytes)
    notes = list(walker.out.notes)
    if walker.out.unsearched:
        notes.append(f"{walker.out.unsearched} containers or entries not searched (depth or size limits)")
    return [rows[i] for i in order[:top]], len(rows), sum(r.nbytes for r in rows), notes


def _sum_unique(tensors: list[Any]) -> tuple[int, dict[str, int]]:
    """(bytes, {kind: count} of those that hold no memory) of tensors, each storage once."""
    seen: set = set()
    total = 0
    metas: dict[str, int] = {}
    for t in tensors:
        kind = no_memory_kind(t)
        if kind is not None:
            metas[kind] = metas.get(kind, 0) + 1
            continue
        key = storage_key(t) or ("tensor", id(t))
        if key in seen:
            continue
        seen.add(key)
        total += key[2] if key[0] != "tensor" else tensor_bytes(t)
    return total, metas


def _no_memory_note(metas: dict[str, int]) -> str:
    """`` (+2 meta, +1 fake)``, or "" when every tensor holds memory."""
    return f" ({', '.join(f'+{n} {kind}' for kind, n in metas.items())})" if metas else ""


def _size_note(nbytes: int, metas: dict[str, int]) -> str:
    return human_bytes(nbytes) + _no_memory_note(metas)


def model_holdings(models: list[tuple[str, Any]]) -> list[Holding]:
    """Usage: ``model_holdings([("model", m)])``; per model: parameters + buffers, and its
    gradients (``p.grad``) as a row of their own when any parameter has one."""
    out = []
    for name, model in models:
        if not is_module(model):
            continue
        try:
            out.extend(_model_rows(name, model))
        except Exception as exc:  # a module whose parameters cannot be listed: say so, never guess
            out.append(Holding("model", f"{name} ({type_name(model)})", None, f"? ({type(exc).__name__})"))
    return out


def _model_rows(name: str, model: Any) -> list[Holding]:
    """The model's row and, when any parameter has a ``.grad``, its gradients' row."""
    out = []
    params = list(model.parameters())
    buffers = list(model.buffers())
    p_bytes, p_meta = _sum_unique(params)
    b_bytes, b_meta = _sum_unique(buffers)
    count = sum(int(p.numel()) for p in params)
    out.append(Holding("model", f"{name} ({type_name(model)})", p_bytes + b_bytes,
                       f"params {_size_note(p_bytes, p_meta)} ({human_count(count)}) · "
                       f"buffers {_size_note(b_bytes, b_meta)}"))
    grads = [g for g in (safe_getattr(p, "grad", None) for p in params) if is_tensor(g)]
    if grads:
        g_bytes, g_meta = _sum_unique(grads)
        out.append(Holding("gradients", name, g_bytes,
                           f"{len(grads)} of {len(params)} parameters have .grad"
                           + _no_memory_note(g_meta)))
    return out


def cache_holdings(caches: list[tuple[str, Any]]) -> list[Holding]:
    """Usage: ``cache_holdings([("past_key_values", cache)])``; one row per KV cache."""
    out = []
    for name, cache in caches:
        try:
            report = inspect_cache(cache)
        except Exception as exc:  # a cache-like object that is no cache after all
            out.append(Holding("kv cache", f"{name} ({type_name(cache)})", None, f"? ({type(exc).__name__})"))
            continue
        seq = f" · seq {report.seq}" if report.seq is not None else ""
        resident = 0 if report.device == "meta" else report.nbytes  # meta tensors hold no storage
        out.append(Holding("kv cache", f"{name} ({report.class_name})", resident,
                           f"{len(report.main_layers)} layers{seq}"
                           + (f" · {report.dtype} {report.device}" if report.dtype else "")))
    return out


def find_optimizers(namespace: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Usage: ``find_optimizers(frame.f_locals)``; the ``torch.optim.Optimizer`` instances (by type) among
    the locals, then among ``self``'s instance attributes (``self.optimizer`` of a trainer)."""
    base = getattr(getattr(sys.modules.get("torch"), "optim", None), "Optimizer", None)
    if not isinstance(base, type):
        return []
    found, seen = [], set()
    owner = namespace.get("self")
    attrs = dict(instance_dict(owner)) if owner is not None else {}
    items = list(namespace.items()) + [(f"self.{k}", v) for k, v in attrs.items() if type(k) is str]
    for name, value in items:
        if issubclass(type(value), base) and id(value) not in seen:
            seen.add(id(value))
            found.append((str(name), value))
    return found


def optimizer_holdings(optimizers: list[tuple[str, Any]]) -> list[Holding]:
    """Usage: ``optimizer_holdings(find_optimizers(locals))``; its state tensors (exp_avg...)
    and the gradients of the parameters it handles."""
    out = []
    for name, opt in optimizers:
        state = [t for s in dict(opt.state).values() if isinstance(s, Mapping) for t in s.values() if is_tensor(t)]
        params = [p for g in list(opt.param_groups) for p in g.get("params", ()) if is_tensor(p)]
        grads = [g for g in (safe_getattr(p, "grad", None) for p in params) if is_tensor(g)]
        s_bytes, s_meta = _sum_unique(state)
        g_bytes, _ = _sum_unique(grads)
        out.append(Holding("optimizer", f"{name} ({type_name(opt)})", s_bytes,
                           f"{len(state)} state tensors{_no_memory_note(s_meta)} · "
                           f"{len(grads)} of {len(params)} params with .grad ({human_bytes(g_bytes)})"))
    return out
