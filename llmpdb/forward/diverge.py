"""Forward hooks for ``diverge``: record one pass's module inputs and outputs, compare a second pass on the fly.

Usage::

    first = RunRecorder(hooked_modules(model, paths), budget=2**30)   # paths: {id(module): "model.norm"}
    with first.hooked():
        model(**inputs)                          # every module call: inputs and outputs copied (detached)
    first.forget_sharing()
    second = RunComparer(hooked_modules(variant, paths_of_variant), first, rtol=None, atol=None)
    with second.hooked():
        variant(**inputs)                        # each call compared against the same call of the first run
    second.rows, second.first                    # CallCompare records up to the first divergence

Calls of the two runs are matched by the order they start (the k-th module call of each run) and must
have the same path; a call at another path ends the comparison (``structure``). Tensors are found in
nested outputs and arguments (tuples, lists, dicts, ``ModelOutput``; three levels deep; caches and other
objects are not walked). The first run keeps a detached copy (``clone``) of each tensor, on its own
device, so an in-place change later in the pass cannot change a record; a tensor that an earlier call
already produced and that is unchanged since (same object, same version counter) is kept once. When the
copies would pass ``budget`` bytes, recording stops there: only the calls recorded so far are compared.
The second run keeps nothing: it compares at each hook and frees the first run's record of that call.
Hooks never raise into the forward (a failure is kept in ``problems``); they are removed however the
pass ends. Values are read: the user asked for a comparison.
"""

from __future__ import annotations

import sys
import weakref
from contextlib import contextmanager
from dataclasses import dataclass

from ..inspect.diverge_records import CallCompare, TensorDiff, compare_tensors
from ..inspect.safe import is_tensor, safe_getattr
from ..inspect.shape_summary import named_tensor_leaves
from .arming import dynamo_disable

__all__ = ["RunRecorder", "RunComparer", "RecordedCall", "hooked_modules", "call_tensors", "padding_mask"]


def hooked_modules(root, names: dict[int, str]) -> list[tuple[object, str]]:
    """``[(module, path)]`` for every module of ``root`` (``names``: ``{id(module): path}``), root first."""
    out, seen = [], set()
    for _, module in root.named_modules():
        if id(module) not in seen:
            seen.add(id(module))
            out.append((module, names.get(id(module)) or "(root)"))
    return out


def call_tensors(args, kwargs) -> list[tuple[str, object]]:
    """The tensors of a call's arguments: ``[("input[0]", t), ("attention_mask", m)]``."""
    found = named_tensor_leaves(tuple(args or ()), "input")
    for key, value in dict.items(kwargs or {}):
        found.extend(named_tensor_leaves(value, str(key)))
    return found


def _raised(output) -> bool:
    """The call ended with an exception: torch runs an ``always_call`` hook with ``None`` from its handler."""
    return output is None and sys.exc_info()[1] is not None


def _nbytes(t) -> int:
    return int(t.numel()) * int(t.element_size())


class _OverBudget(Exception):
    pass


@dataclass
class RecordedCall:
    path: str
    class_name: str
    enclosing: tuple[str, str] | None
    inputs: list[tuple[str, object]] | None = None     # None: not recorded (memory)
    outputs: list[tuple[str, object]] | None = None
    raised: bool = False


class _HookedRun:
    """Pre- and post-hooks on every module of one run; a subclass's ``_enter``/``_leave`` do its work."""

    def __init__(self, modules: list[tuple[object, str]]):
        self.modules = modules
        self._labels = {id(m): p for m, p in modules}
        self._handles: list = []
        self._open: list[tuple[object, int]] = []
        self.calls = 0
        self.problems: list[str] = []
        self.progress = None  # called with the count of module calls so far (a progress bar's update)

    @contextmanager
    def hooked(self):
        pre, post = dynamo_disable(self._pre), dynamo_disable(self._post)
        try:
            for module, _ in self.modules:
                self._handles.append(module.register_forward_pre_hook(pre, with_kwargs=True))
                self._handles.append(module.register_forward_hook(post, always_call=True))
            yield self
        finally:
            handles, self._handles = self._handles, []
            for handle in handles:
                handle.remove()
            self._open.clear()

    def _enclosing(self) -> tuple[str, str] | None:
        if not self._open:
            return None
        module = self._open[-1][0]
        return self._labels.get(id(module), "?"), type(module).__name__

    def _pre(self, module, args, kwargs):
        index = self.calls
        self.calls += 1
        if self.progress is not None:
            self.progress(self.calls)
        try:
            self._enter(index, module, args, kwargs)
        except Exception as exc:  # a hook must never become an error in the user's forward
            self.problems.append(f"at {self._labels.get(id(module), '?')}: {type(exc).__name__}: {exc}")
        self._open.append((module, index))
        return None

    def _post(self, module, args, output):
        for pos in range(len(self._open) - 1, -1, -1):
            if self._open[pos][0] is module:
                index = self._open.pop(pos)[1]
                break
        else:
            return None
        try:
            self._leave(index, module, output)
        except Exception as exc:
            self.problems.append(f"at {self._labels.get(id(module), '?')}: {type(exc).__name__}: {exc}")
        return None



class RunRecorder(_HookedRun):
    """The first run: a copy of every call's input and output tensors, up to ``budget`` bytes."""

    def __init__(self, modules, budget: int):
        super().__init__(modules)
        self.budget = budget
        self.used = 0
        self.records: list[RecordedCall] = []
        self.over_budget_at: int | None = None
        self.recorded = 0
        self._kept: dict[int, tuple[object, int, object]] = {}
        self.attends = None  # the expression's padding mask (the first call's attention_mask), see padding_mask

    def _keep(self, t):
        hit = self._kept.get(id(t))
        version = safe_getattr(t, "_version", -1)
        if hit is not None and hit[0]() is t and hit[1] == version:
            return hit[2]
        size = _nbytes(t)
        if self.used + size > self.budget:
            raise _OverBudget()
        copy = t.detach().clone()
        self.used += size
        try:
            ref = weakref.ref(t)
        except TypeError:  # a tensor type without weak references: kept once per call only
            ref = lambda: None  # noqa: E731
        self._kept[id(t)] = (ref, version, copy)
        return copy

    def forget_sharing(self) -> None:
        """Drop the index of kept tensors (needed only while the run records), so that the second run's
        freeing of each compared record releases its memory."""
        self._kept.clear()

    def _keep_all(self, named):
        if self.over_budget_at is not None:
            return None
        try:
            return [(where, self._keep(t)) for where, t in named if is_tensor(t)]
        except _OverBudget:
            self.over_budget_at = len(self.records) - 1
            return None

    def _enter(self, index, module, args, kwargs) -> None:
        record = RecordedCall(self._labels.get(id(module), "?"), type(module).__name__, self._enclosing())
        self.records.append(record)
        if index == 0:
            self.attends = padding_mask(kwargs)
        record.inputs = self._keep_all(call_tensors(args, kwargs))

    def _leave(self, index, module, output) -> None:
        record = self.records[index]
        record.raised = _raised(output)
        if record.raised:
            return
        record.outputs = self._keep_all(named_tensor_leaves(output))
        self.recorded += record.outputs is not None


def padding_mask(kwargs):
    """The call's ``attention_mask`` as a bool ``(batch, seq)`` copy when it is a 2-D integer/bool mask
    that masks some position (a padded batch), else None."""
    mask = dict.get(kwargs or {}, "attention_mask")
    if not is_tensor(mask) or mask.dim() != 2 or mask.is_floating_point() or mask.is_complex():
        return None
    attends = mask.detach() != 0
    return attends.clone() if not bool(attends.all()) else None


def _compare_named(first, second, rtol, atol, attends=None) -> tuple[TensorDiff, ...]:
    """Tensors matched by where they sit; one present in a single run is noted, not counted as a difference
    (an eager attention returns its weights where sdpa returns None)."""
    theirs = dict(second)
    out = []
    for where, ref in first:
        other = theirs.pop(where, None)
        if other is None or not is_tensor(other):
            out.append(TensorDiff(where, None, None, False, note="only in run 1"))
            continue
        out.append(compare_tensors(where, ref, other, rtol=rtol, atol=atol, attends=attends))
    out.extend(TensorDiff(where, None, None, False, note="only in run 2") for where in theirs)
    return tuple(out)


class RunComparer(_HookedRun):
    """The second run: each call compared against the first run's record; stops at the first divergence."""

    def __init__(self, modules, first: RunRecorder, *, rtol: float | None = None, atol: float | None = None):
        super().__init__(modules)
        self.first_run = first
        self.rtol, self.atol = rtol, atol
        self.rows: list[CallCompare] = []
        self.first: CallCompare | None = None
        self.structure: str | None = None
        self._inputs: dict[int, tuple[TensorDiff, ...]] = {}

    @property
    def done(self) -> bool:
        return self.first is not None or self.structure is not None

    def _enter(self, index, module, args, kwargs) -> None:
        if self.done:
            return
        records = self.first_run.records
        path = self._labels.get(id(module), "?")
        if index >= len(records):
            self.structure = (f"run 2 calls {path} ({type(module).__name__}) as call {index}; "
                              f"run 1 made {len(records)} calls")
            return
        record = records[index]
        if record.path != path or record.class_name != type(module).__name__:
            self.structure = (f"call {index} is {record.path} ({record.class_name}) in run 1 but {path} "
                              f"({type(module).__name__}) in run 2")
            return
        if record.inputs is not None:
            self._inputs[index] = _compare_named(record.inputs, call_tensors(args, kwargs), self.rtol, self.atol,
                                                 self.first_run.attends)
            record.inputs = None

    def _leave(self, index, module, output) -> None:
        if self.done:
            return
        records = self.first_run.records
        if index >= len(records) or records[index].outputs is None or _raised(output):
            self._inputs.pop(index, None)
            return
        record = records[index]
        outputs = _compare_named(record.outputs, named_tensor_leaves(output), self.rtol, self.atol,
                                 self.first_run.attends)
        record.outputs = None
        row = CallCompare(index, record.path, record.class_name, outputs, self._inputs.pop(index, ()),
                          record.enclosing)
        self.rows.append(row)
        if row.beyond:
            self.first = row
