"""Find every tensor in a frame or object and describe it from metadata alone.

Usage::

    info = tensor_info(t, "x")                   # TensorInfo(path='x', shape=(1, 7), dtype='i64', ...)
    found = walk_tensors(outputs, "outputs")     # [TensorInfo('outputs.logits', ...), ...]
    found = frame_tensors(frame.f_locals)        # every local, in order, dunder names skipped
    found = shapes()                             # the caller's locals; shapes(obj, name="x") for one object

Nothing here reads tensor data (shape, dtype, device, strides, layout and grad_fn are metadata) unless
``stats=True`` asks for value statistics (``inspect.stats``). ``nbytes`` is ``numel * element_size`` of the
logical tensor: for meta tensors the size it would take, for quantized tensors the integer storage (scales
not counted), for sparse tensors the stored values plus indices, for DTensors the global (not local) size.

The walker enters dict/Mapping (``x['key']``), ``UserDict`` such as ``BatchEncoding`` (``inputs['input_ids']``),
list/tuple/deque (``x[0]``), named tuples and ``torch.return_types`` (``x.values``), dataclasses and
transformers ``ModelOutput`` (``outputs.logits``), and plain objects through their instance ``__dict__``
(``cache.layers[0].keys``: this is how transformers ``Cache`` objects of every version and class are read,
private attributes such as ``_quantized_keys`` included). Nested plain objects with more than 32 attributes
are not entered (an object passed explicitly always is). ``nn.Module`` and optimizer objects are never
walked into: each becomes one ``ObjectSummary`` (class, parameter count, dtypes, devices, bytes) — except
the object passed explicitly to ``walk_tensors``/``shapes``, whose parameters and buffers are listed.
Sets and other iterables are never iterated (iterating may consume a generator or load data).
The walk is cycle-safe, bounded (``max_depth``, ``max_items``, at most 2000 entries per container and
20000 objects visited) and records what it left out; an object that raises on access becomes a note.
The same tensor reached twice keeps both rows, the second flagged ``same as <first path>``.

The walk runs no user code: containers are recognised by ``type(obj)`` and read in C (``dict.items``,
``tuple.__iter__``, the instance dict through the standard descriptor, dataclass fields from what the
instance stores), so a lazy property, a ``__getattr__`` proxy or a mock is never asked anything. A
``Mapping`` whose ``items()`` is the user's own code is entered only when passed explicitly (standard
library ones such as ``ChainMap`` and ``os.environ`` are read as usual).
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import sys
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .frames import frame_locals
from .kinds import (MISSING, instance_dict, is_hf, library_defines, sequence_items, sequence_iter, sequence_length,
                    stored)
from .safe import is_tensor, no_torch_function, safe_getattr, short_dtype, tensor_brief, type_name
from .stats import TensorStats, tensor_stats

__all__ = [
    "TensorInfo", "ObjectSummary", "TensorWalk", "tensor_info", "walk_tensors", "frame_tensors", "shapes",
]

MAX_ATTRS = 32
MAX_ENTRIES = 2000
MAX_NODES = 20000
_PRIMITIVES = (type(None), bool, int, float, complex, str, bytes, bytearray, range, slice, type(Ellipsis))
_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
           types.FrameType, types.CodeType, types.TracebackType, types.GeneratorType, types.CoroutineType)
_NO_DATA = {"FakeTensor", "FunctionalTensor"}


@dataclass(frozen=True)
class TensorInfo:
    """One tensor: where it is and what it is. ``shape`` holds a ``str`` for a symbolic/ragged dimension."""

    path: str
    shape: tuple[int | str, ...]
    dtype: str
    device: str
    nbytes: int
    requires_grad: bool
    grad_fn: str | None
    flags: tuple[str, ...]
    stats: TensorStats | None = None


@dataclass(frozen=True)
class ObjectSummary:
    """An ``nn.Module`` or optimizer seen during a walk, summarized instead of walked into.

    ``params``: parameter elements (module) or parameters handled (optimizer); ``nbytes``: parameters plus
    buffers (module) or the optimizer state (optimizer); ``detail``: ``eval``/``training`` or group counts.
    """

    path: str
    type_name: str
    kind: str
    params: int
    nbytes: int
    dtypes: tuple[str, ...]
    devices: tuple[str, ...]
    detail: str


class TensorWalk(list):
    """A ``list[TensorInfo]`` that also says what the walk summarized or left out.

    ``objects``: modules/optimizers summarized; ``left_out``: tensors found past ``max_items``;
    ``unsearched``: containers past ``max_depth`` plus entries past the per-container/visit limits;
    ``notes``: one line per object that could not be read, and per container already listed under another path.
    """

    def __init__(self, items: Any = ()) -> None:
        super().__init__(items)
        self.objects: list[ObjectSummary] = []
        self.left_out = 0
        self.unsearched = 0
        self.notes: list[str] = []
        self.limits: dict[str, int] = {}


def _shape(t: Any) -> tuple[int | str, ...]:
    try:
        return tuple(s if type(s) is int else str(s) for s in t.shape)
    except Exception:  # strided nested tensors have no sizes
        dims: list[int | str] = []
        for i in range(t.dim()):
            try:
                dims.append(int(t.size(i)))
            except Exception:  # a size that cannot be read shows as ?
                dims.append("?")
        return tuple(dims)


def _mro_names(t: Any) -> set[str]:
    return {c.__name__ for c in type(t).__mro__}


def _nbytes(t: Any) -> int:
    layout = str(safe_getattr(t, "layout", "torch.strided"))
    if layout == "torch.sparse_coo":
        return t._values().nbytes + t._indices().nbytes
    if layout in ("torch.sparse_csr", "torch.sparse_bsr"):
        return t.values().nbytes + t.crow_indices().nbytes + t.col_indices().nbytes
    if layout in ("torch.sparse_csc", "torch.sparse_bsc"):
        return t.values().nbytes + t.ccol_indices().nbytes + t.row_indices().nbytes
    try:
        return int(t.numel()) * int(t.element_size())
    except Exception:  # ragged nested tensors: their packed values
        return int(t.values().numel()) * int(t.element_size())


def _flags(t: Any) -> tuple[str, ...]:
    names = _mro_names(t)
    torch = sys.modules["torch"]
    layout = str(safe_getattr(t, "layout", "torch.strided")).replace("torch.", "")
    nested = bool(safe_getattr(t, "is_nested", False))
    flags = []
    if layout == "strided" and not nested:
        try:
            if not t.is_contiguous():
                flags.append("non-contiguous")
        except Exception as exc:
            flags.append(f"contiguity unknown ({type(exc).__name__})")
    if safe_getattr(t, "is_meta", False):
        flags.append("meta")
    if layout == "sparse_coo":
        flags.append("sparse")
    elif layout not in ("strided", "jagged"):
        flags.append(layout)
    if safe_getattr(t, "is_quantized", False):
        flags.append("quantized")
    if "DTensor" in names:
        flags.append("DTensor")
    if names & _NO_DATA:
        flags.append("fake")
    if isinstance(t, torch.nn.Parameter):
        flags.append("Parameter")
    if nested:
        flags.append("nested")
    known = {"Tensor", "Parameter", "DTensor", "NestedTensor", *_NO_DATA}
    if type(t).__name__ not in known:
        flags.append(type(t).__name__)
    return tuple(flags)


def tensor_info(t: Any, path: str, stats: bool = False) -> TensorInfo:
    """Usage: ``tensor_info(t, "outputs.logits")``; metadata only, plus ``tensor_stats`` if ``stats``."""
    with no_torch_function():
        return _tensor_info(t, path, stats)


def _tensor_info(t: Any, path: str, stats: bool) -> TensorInfo:
    grad_fn = safe_getattr(t, "grad_fn", None)
    return TensorInfo(
        path=path,
        shape=_shape(t),
        dtype=short_dtype(safe_getattr(t, "dtype", "?")),
        device=str(safe_getattr(t, "device", "?")),
        nbytes=_nbytes(t),
        requires_grad=bool(safe_getattr(t, "requires_grad", False)),
        grad_fn=None if grad_fn is None else type_name(grad_fn),
        flags=_flags(t),
        stats=tensor_stats(t) if stats else None,
    )


def _is_instance(obj: Any, module: str, attr: str) -> bool:
    cls = getattr(sys.modules.get(module), attr, None)  # a library module's class, never a user object's
    return isinstance(cls, type) and issubclass(type(obj), cls)


def _counted(values: list[Any]) -> tuple[str, ...]:
    counts = collections.Counter(values)
    return tuple(name for name, _ in counts.most_common())


def _summarize_module(m: Any, path: str) -> ObjectSummary:
    params = list(m.parameters())
    buffers = list(m.buffers())
    return ObjectSummary(
        path=path, type_name=type_name(m), kind="module",
        params=sum(int(p.numel()) for p in params),
        nbytes=sum(_nbytes(t) for t in params + buffers),
        dtypes=_counted([short_dtype(p.dtype) for p in params]),
        devices=_counted([str(t.device) for t in params + buffers]),
        detail="training" if safe_getattr(m, "training", False) else "eval",
    )


def _summarize_optimizer(opt: Any, path: str) -> ObjectSummary:
    groups = list(opt.param_groups)
    params = [p for g in groups for p in g.get("params", ())]
    state = [t for s in dict(opt.state).values() if isinstance(s, Mapping) for t in s.values() if is_tensor(t)]
    return ObjectSummary(
        path=path, type_name=type_name(opt), kind="optimizer", params=len(params),
        nbytes=sum(_nbytes(t) for t in state),
        dtypes=_counted([short_dtype(p.dtype) for p in params if is_tensor(p)]),
        devices=_counted([str(p.device) for p in params if is_tensor(p)]),
        detail=f"{len(groups)} group{'s' * (len(groups) != 1)}, {len(params)} params, state {len(state)} tensors",
    )


def _key_text(key: Any) -> str:
    if type(key) in (str, int, float, bool, bytes, type(None)):
        return repr(key)
    if type(key) is tuple and all(type(k) in (str, int, bool, type(None)) for k in key):
        return repr(key)
    return tensor_brief(key) if is_tensor(key) else f"<{type_name(key)}>"  # its __repr__ is user code


def _cut(exc: BaseException, limit: int = 60) -> str:
    try:
        text = str(exc).replace("\n", " ")
    except Exception:  # an exception whose __str__ raises
        text = "<message unavailable>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _dataclass_fields(cls: type) -> list[str] | None:
    """The field names of a dataclass type, from the class dicts (``dataclasses.fields`` would ask the class)."""
    for klass in cls.__mro__:
        fields = klass.__dict__.get("__dataclass_fields__")
        if fields is not None:
            return [name for name in dict.keys(fields) if type(name) is str] if type(fields) is dict else None
    return None


def _param_path(root: str, dotted: str) -> str:
    return root + "".join(f"[{part}]" if part.isdigit() else f".{part}" for part in dotted.split("."))


class _Walker:
    def __init__(self, max_depth: int, max_items: int, stats: bool) -> None:
        self.max_depth, self.max_items, self.stats = max_depth, max_items, stats
        self.out = TensorWalk()
        self.out.limits = {"max_depth": max_depth, "max_items": max_items, "max_entries": MAX_ENTRIES}
        self.first: dict[int, TensorInfo] = {}
        self.seen: dict[int, tuple[str, int]] = {}
        self.active: set[int] = set()
        self.keep: list[Any] = []  # keeps visited objects alive so their ids stay unique
        self.nodes = 0
        self.tensors = 0

    def add_tensor(self, t: Any, path: str) -> None:
        self.tensors += 1
        if len(self.out) >= self.max_items:
            self.out.left_out += 1
            return
        first = self.first.get(id(t))
        if first is not None:
            info = dataclasses.replace(first, path=path, flags=first.flags + (f"same as {first.path}",))
        else:
            info = tensor_info(t, path, stats=self.stats)
            self.first[id(t)] = info
            self.keep.append(t)
        self.out.append(info)

    def children(self, obj: Any, explicit: bool, path: str = "") -> tuple[Iterator[tuple[str, Any]], int] | None:
        """(lazy (suffix, child) pairs, their count) for a container, None for anything else."""
        cls = type(obj)  # type() runs no user code, unlike isinstance's __class__ lookup
        if issubclass(cls, dict):
            if is_hf(obj, "ModelOutput"):
                return ((f".{k}" if type(k) is str and k.isidentifier() else f"[{_key_text(k)}]", v)
                        for k, v in dict.items(obj)), dict.__len__(obj)
            return ((f"[{_key_text(k)}]", v) for k, v in dict.items(obj)), dict.__len__(obj)
        if issubclass(cls, collections.UserDict) and type(stored(obj, "data")) is dict:  # BatchEncoding
            data = stored(obj, "data")
            return ((f"[{_key_text(k)}]", v) for k, v in dict.items(data)), len(data)
        if issubclass(cls, Mapping):
            if not explicit and not library_defines(obj, "items", "__iter__", "__getitem__", "__len__"):
                # a user's Mapping: its items() is its own code (a lazy dataset dict), read only on request
                self.out.notes.append(f"{path}: a {type_name(obj)} (Mapping) is not entered: `shapes {path}` reads it")
                return None
            return ((f"[{_key_text(k)}]", v) for k, v in obj.items()), len(obj)
        values, length = sequence_iter(obj), sequence_length(obj)
        if values is None and issubclass(cls, collections.deque):
            values, length = collections.deque.__iter__(obj), collections.deque.__len__(obj)
        if values is not None:
            names = self.field_names(cls) if issubclass(cls, tuple) else None
            if names is not None:
                return ((f".{n}", v) for n, v in zip(names, values)), length
            return ((f"[{i}]", v) for i, v in enumerate(values)), length
        fields = _dataclass_fields(cls)
        if fields is not None:
            pairs = [(name, stored(obj, name)) for name in fields]
            pairs = [(name, value) for name, value in pairs if value is not MISSING]
            return ((f".{name}", value) for name, value in pairs), len(pairs)
        attrs = instance_dict(obj)
        if not attrs or (len(attrs) > MAX_ATTRS and not explicit):
            return None
        items = [(k, v) for k, v in dict.items(attrs) if not (type(k) is str and k.startswith("__"))]
        return ((f".{k}", v) for k, v in items), len(items)

    @staticmethod
    def field_names(cls: type) -> list[str] | None:
        """A named tuple's (or structseq's) field names, read from the class dicts without running code."""
        for attr in ("_fields", "__match_args__"):
            for klass in cls.__mro__:
                names = klass.__dict__.get(attr)
                if names is not None:
                    names = sequence_items(names)
                    if names and all(type(n) is str for n in names):
                        return names
                    break
        return None


    def visit(self, obj: Any, path: str, depth: int, explicit: bool = False) -> None:
        if self.nodes >= MAX_NODES:
            self.out.unsearched += 1
            return
        self.nodes += 1
        try:
            self._visit(obj, path, depth, explicit)
        except Exception as exc:
            self.out.notes.append(f"{path}: not searched ({type(exc).__name__}: {_cut(exc)})")

    def _visit(self, obj: Any, path: str, depth: int, explicit: bool) -> None:
        if is_tensor(obj):
            self.add_tensor(obj, path)
            return
        if issubclass(type(obj), _PRIMITIVES + _OPAQUE):
            return
        module = _is_instance(obj, "torch.nn", "Module")
        optimizer = not module and _is_instance(obj, "torch.optim", "Optimizer")
        if (module or optimizer) and id(obj) in self.seen:
            self.out.notes.append(f"{path} is {self.seen[id(obj)][0]} (summarized above)")
            return
        if module and explicit:
            self.seen[id(obj)] = (path, 0)
            for name, t in itertools.chain(obj.named_parameters(), obj.named_buffers()):
                self.add_tensor(t, _param_path(path, name))
            return
        if module or optimizer:
            self.seen[id(obj)] = (path, 0)
            summarize = _summarize_module if module else _summarize_optimizer
            self.out.objects.append(summarize(obj, path))
            return
        if id(obj) in self.active:
            return  # a cycle: this container is being walked above us
        if id(obj) in self.seen:
            first, count = self.seen[id(obj)]
            if count:
                self.out.notes.append(f"{path} is {first} (its {count} tensors are listed there)")
            return
        found = self.children(obj, explicit, path)
        if found is None:
            return
        if depth >= self.max_depth:
            self.out.unsearched += 1
            return
        pairs, length = found
        self.out.unsearched += max(0, length - MAX_ENTRIES)
        self.active.add(id(obj))
        self.keep.append(obj)
        before = self.tensors
        try:
            for suffix, child in list(itertools.islice(pairs, MAX_ENTRIES)):
                self.visit(child, path + suffix, depth + 1)
        finally:
            self.active.discard(id(obj))
            self.seen[id(obj)] = (path, self.tensors - before)


def walk_tensors(obj: Any, path: str, *, max_depth: int = 6, max_items: int = 200,
                 stats: bool = False) -> TensorWalk:
    """Usage: ``walk_tensors(outputs, "outputs")``; every tensor inside ``obj``, paths starting at ``path``.

    ``obj`` is walked explicitly: a module lists its parameters and buffers, a large object is entered.
    """
    walker = _Walker(max_depth, max_items, stats)
    walker.visit(obj, path, 0, explicit=True)
    return walker.out


def frame_tensors(locals: Mapping[str, Any], *, stats: bool = False, max_depth: int = 6,
                  max_items: int = 200) -> TensorWalk:
    """Usage: ``frame_tensors(frame.f_locals)``; every local in order, one walk. Dunder names and pytest's
    assertion temporaries (``@py_assert1``: what a rewritten ``assert`` keeps of its operands) are skipped."""
    walker = _Walker(max_depth, max_items, stats)
    for name, value in list(locals.items()):
        if isinstance(name, str) and (name.startswith("__") and name.endswith("__") or name.startswith("@py_")):
            continue
        walker.visit(value, str(name), 0)
    return walker.out


def shapes(obj: Any = None, *, stats: bool = False, name: str | None = None) -> TensorWalk:
    """Usage: ``llmpdb.shapes()`` (caller's locals) or ``llmpdb.shapes(outputs)``; a list of TensorInfo.

    Without ``name``, an object is named after the caller's local that holds it (identity), else ``obj``.
    """
    caller = sys._getframe(1)
    try:
        if obj is None:
            return frame_tensors(frame_locals(caller), stats=stats)
        if name is None:
            holders = (k for k, v in frame_locals(caller).items() if v is obj and k.isidentifier() and k[:2] != "__")
            name = next(holders, "obj")
        return walk_tensors(obj, name, stats=stats)
    finally:
        del caller
