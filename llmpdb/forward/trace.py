"""Forward hooks that record one forward pass: each module call's path, class, input and output shapes.

Usage::

    trace = ForwardTrace([(model, "")], depth=None, only=None)   # ``only``: ids of the modules to show
    with trace.recording():            # ``trace EXPR``: record everything EXPR runs, hooks removed after
        model(**inputs)
    trace.calls                        # [TraceCall, ...] in the order the calls started

    trace.arm_next(on_done)            # ``trace``: the next call of a root model; ``on_done(trace)`` runs
                                       # when that call returns or raises, after the hooks are removed
    trace.remove()                     # every hook off (idempotent); ``trace.armed`` is then False

Shapes only: the hooks read tensor metadata (``tensor_shape``, ``dtype``), never values. Each traced
module gets a forward pre-hook (with kwargs) and a forward hook registered with ``always_call=True``, so a
forward that raises an ``Exception`` still closes its row and, for a root, finishes the trace. Hooks see
module boundaries only: a ``view``/``transpose``/``cat`` inside a forward is not a module call.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager

from ..inspect.shape_summary import first_dtype, shape_items
from ..inspect.trace_records import TraceCall
from .arming import dynamo_disable

__all__ = ["ForwardTrace", "traced_modules"]

CALL_LIMIT = 5000


def traced_modules(roots: list[tuple[object, str]], names_of, depth: int | None = None,
                   only: set[int] | None = None) -> list[tuple[object, str, bool]]:
    """``[(module, path, shown)]`` for every module under the roots within ``depth`` (0: the root only).

    ``names_of(root)`` gives ``{id(module): path}``; ``shown`` is False for modules outside ``only``
    (they are not hooked unless they are roots, which end the trace)."""
    out: list[tuple[object, str, bool]] = []
    seen: set[int] = set()
    for root, prefix in roots:
        names = names_of(root)
        for _, module in root.named_modules():
            if id(module) in seen:
                continue
            seen.add(id(module))
            path = names.get(id(module), "")
            if prefix:
                path = f"{prefix}.{path}" if path else prefix
            level = 0 if module is root else path.count(".") + (0 if prefix else 1)
            if depth is not None and level > depth:
                continue
            shown = only is None or id(module) in only
            if shown or module is root:
                out.append((module, path or "(root)", shown))
    return out


class ForwardTrace:
    """The hooks of one trace; ``calls`` fills while a forward runs."""

    def __init__(self, modules: list[tuple[object, str, bool]], roots: list[object]):
        self.modules = modules
        self.root_ids = {id(r) for r in roots}
        self.calls: list[TraceCall] = []
        self.dropped = 0
        self._handles: list = []
        self._open: list[tuple[object, int]] = []   # (module, index in calls) of running calls
        self._labels = {id(m): (p, shown) for m, p, shown in modules}
        self._recording = False
        self._root_depth = 0
        self._on_done = None
        self.finished = False

    @property
    def armed(self) -> bool:
        return bool(self._handles)

    def _arm(self) -> None:
        pre, post = dynamo_disable(self._pre), dynamo_disable(self._post)
        try:
            for module, _, _ in self.modules:
                self._handles.append(module.register_forward_pre_hook(pre, with_kwargs=True))
                self._handles.append(module.register_forward_hook(post, always_call=True))
        except BaseException:
            self.remove()
            raise

    def remove(self) -> None:
        handles, self._handles = self._handles, []
        for handle in handles:
            handle.remove()

    @contextmanager
    def recording(self):
        """Record every traced call made inside the block; the hooks are removed however it ends."""
        self._arm()
        self._recording = True
        try:
            yield self
        finally:
            self._recording = False
            self.remove()
            self._close_open("not finished")
            self.finished = True

    def arm_next(self, on_done) -> None:
        """Record the next call of a root model; ``on_done(self)`` runs once it returned or raised."""
        self._on_done = on_done
        self._arm()

    def _close_open(self, note: str) -> None:
        for _, index in self._open:
            self.calls[index] = _with_note(self.calls[index], note)
        self._open.clear()

    def finish(self, note: str = "") -> None:
        """End a next-forward trace early (a stop came before the root's forward ended); idempotent."""
        if self.finished:
            return
        self.finished = True
        self._recording = False
        self.remove()
        self._close_open(note or "not finished")
        on_done, self._on_done = self._on_done, None
        if on_done is not None:
            on_done(self)

    def _pre(self, module, args, kwargs):
        if not self._recording:
            if self._on_done is None or id(module) not in self.root_ids or self.finished:
                return None
            self._recording = True
        if id(module) in self.root_ids:
            self._root_depth += 1
        path, shown = self._labels.get(id(module), ("?", True))
        if not shown:
            self._open.append((module, -1))
            return None
        if len(self.calls) >= CALL_LIMIT:
            self.dropped += 1
            self._open.append((module, -1))
            return None
        nest = sum(1 for _, index in self._open if index >= 0)
        self.calls.append(TraceCall(len(self.calls), path, type(module).__name__, nest,
                                    tuple(shape_items(args, kwargs, limit=4)), (), first_dtype((args, kwargs)), None))
        self._open.append((module, len(self.calls) - 1))
        return None

    def _post(self, module, args, output):
        if not self._recording or not self._open:
            return None
        index = -1
        for pos in range(len(self._open) - 1, -1, -1):
            if self._open[pos][0] is module:
                index = self._open.pop(pos)[1]
                break
        else:
            return None
        if index >= 0:
            raised = sys.exc_info()[1] if output is None else None
            call = self.calls[index]
            self.calls[index] = TraceCall(call.order, call.path, call.class_name, call.nest, call.inputs,
                                          tuple(shape_items(output, limit=4)), call.in_dtype, first_dtype(output),
                                          f"raised {type(raised).__name__}" if raised is not None else "")
        if id(module) in self.root_ids:
            self._root_depth -= 1
            if self._root_depth == 0 and self._on_done is not None:
                self.finish(note="")
        return None


def _with_note(call: TraceCall, note: str) -> TraceCall:
    return TraceCall(call.order, call.path, call.class_name, call.nest, call.inputs, call.outputs,
                     call.in_dtype, call.out_dtype, call.note or note)
