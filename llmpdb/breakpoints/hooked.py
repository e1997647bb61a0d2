"""The hook engine of fast breakpoints (Python 3.11): no trace function at all while continuing.

Usage: created by ``FastBreakpointsMixin`` on 3.11 (``llmpdb.breakpoints.mixin``); same interface as
``TraceEngine`` plus ``close()``, which puts every function's original code back.

Arming (when the set of breakpoints changes): the flags of the guarded script (``guards``: ``python -m
llmpdb`` compiles it with a guarded hook on every line) are set; for every other file, one ``gc`` pass finds
the function objects of files holding breakpoints; each whose code (or a nested code object) holds a
breakpoint line gets a copy compiled with hooks (``bytecode.instrument``) as its ``__code__``; modules of
those files imported later get hooked code from their loader. At run time a hook installs a one-shot trace
function on its own frame; the interpreter then reports a genuine line event, pdb decides as usual, and the
trace function is removed again. The lean trace engine (``TraceEngine``) still runs where hooks cannot
reach: ``next``/ ``until``/``return`` (the watched frame is already running), frames and suspended
generators that were already running the original code when a breakpoint was set, and code the assembler
refuses.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
import types
import weakref
from typing import Any

from .engine import ALL_LINES, CONTINUE, INVISIBLE_CODE_IDS, WATCH, code_breakpoint_lines, identity
from .bytecode import first_line, may_reach
from .guards import GUARDED, arm_guards, covers, is_guarded
from .heap_walk import breakpoint_code_on_heap
from .interrupt import register_delivery
from .hooked_dynamo import DynamoHandOff
from .trace import TraceEngine
from .patching import LOADERS as _LOADERS
from .patching import REGISTRY as _REGISTRY
from .patching import hooked_tree as _hooked_tree
from .patching import called_by_dynamo, code_tree, dynamo_loaded, install_audit_hook
from .patching import AUDIT_SINK, restore_all

__all__ = ["HookEngine"]

_EMPTY: frozenset[int] = frozenset()


class HookEngine(DynamoHandOff, TraceEngine):
    """Breakpoint lines call a hook compiled into the code; no trace function while continuing."""

    def __init__(self, pdb: Any):
        super().__init__(pdb)
        self.hook_breaks: dict[str, frozenset[int]] = {}
        self.generation = -1
        self.armed = False
        self.mode = ""
        self.old_frames: list = []  # running original code whose code tree holds breakpoint lines
        self.suspended: list = []  # weak references to generators suspended in such code
        self.pending: set[str] = set()  # breakpoint files whose code ran or was compiled without hooks
        self.problems_seen = False  # some code holding breakpoint lines could not be hooked: trace it
        self.tried_late: dict[int, types.CodeType] = {}
        self.dynamo_codes: dict[int, types.CodeType] = {}  # code torch.compile reads: never hooked
        self.dynamo_read: dict[int, types.CodeType] = {}  # code dynamo was handed (``gave_dynamo``): for good
        self.said: set[str] = set()  # dynamo notes already shown at the prompt

    # ---- arming ----------------------------------------------------------------------------------------
    def hook_lines(self, code: types.CodeType) -> frozenset[int]:
        """The lines of ``code`` that get hooks: its breakpoint lines, or its first line for ``b function``
        (none for guarded code: its guards are armed instead)."""
        if GUARDED and is_guarded(code):
            return _EMPTY
        file_lines = self.hook_breaks.get(self.pdb.canonic(code.co_filename))
        if not file_lines:
            return _EMPTY
        if self.dynamo_codes and self.dynamo_codes.get(identity(code)) is code:
            return _EMPTY  # dynamo would read the hook constant and fail: the trace engine covers it
        lines = code_breakpoint_lines(code, file_lines)
        if lines is ALL_LINES:
            first = first_line(code)
            return frozenset({first}) if first is not None else _EMPTY
        return lines

    def _tree_has_lines(self, code: types.CodeType) -> bool:
        if self.hook_lines(code):
            return True
        return any(isinstance(c, types.CodeType) and self._tree_has_lines(c) for c in code.co_consts)

    def _may_run_breakpoint_code(self, frame) -> bool:
        """Whether a frame running original code can still reach a breakpoint line of its own, or make a
        function from nested code holding one (a ``def`` still ahead, or in a loop)."""
        code = frame.f_code
        if not self._tree_has_lines(code):
            return False
        file_lines = self.hook_breaks.get(self.pdb.canonic(code.co_filename), _EMPTY)
        own = code_breakpoint_lines(code, file_lines) if file_lines else _EMPTY
        nested = frozenset(i for i, const in enumerate(code.co_consts)
                           if isinstance(const, types.CodeType) and self._tree_has_lines(const))
        return may_reach(code, frame.f_lasti, own, own is ALL_LINES, nested)

    def lines_for(self, code) -> frozenset[int]:
        entry = _REGISTRY.hooked.get(identity(code))
        if (entry is not None and entry[0] is code) or (GUARDED and is_guarded(code)):
            return _EMPTY  # its hooks report the breakpoint lines
        return super().lines_for(code)

    def hook_loaded(self, code: types.CodeType) -> types.CodeType:
        """A module of a breakpoint file is being loaded: hook its whole code tree."""
        if self.pdb.canonic(code.co_filename) not in self.hook_breaks:
            return code
        hooked = _hooked_tree(code, self.hook_lines, {}, self.problems)
        _REGISTRY.untracked = True  # the module makes its functions from hooked code
        self.pending.discard(self.pdb.canonic(code.co_filename))
        if self.problems and not self.problems_seen:
            self.problems_seen = True  # code that got no hooks is traced from now on
        if self.armed:
            self.refresh()
        return hooked if hooked is not None else code

    def saw_unhooked(self, filename: str, code: types.CodeType | None) -> None:
        """Code of a breakpoint file is compiled or about to run without hooks: trace until breakpoints change."""
        canonic = self.pdb.canonic(filename)
        if canonic not in self.hook_breaks:
            return
        if code is not None:
            entry = _REGISTRY.hooked.get(identity(code))
            if (entry is not None and entry[0] is code) or not self._tree_has_lines(code):
                return
        if canonic not in self.pending:
            self.pending.add(canonic)
            if self.armed and sys.gettrace() != self._global:
                self.refresh()

    def refresh(self) -> None:
        """Something changed while running (breakpoints, unhooked code seen): re-plan from the caller's stack."""
        if self.armed:
            self.key = None
            self.activate(self.mode, sys._getframe(1))

    def _rearm(self, breaks: dict[str, frozenset[int]], frame) -> None:
        started = time.perf_counter()
        try:
            self._rearm_now(breaks, frame)
        finally:
            self.arm_seconds += time.perf_counter() - started

    def _reusable_functions(self, breaks: dict[str, frozenset[int]]) -> list | None:
        """The functions hooked before when they are all the new breakpoints can need (each file's lines a
        subset of before: a ``tbreak`` fired, a ``clear``; no code loaded hooked or seen unhooked); else None."""
        old = self.hook_breaks
        if (not old or _REGISTRY.untracked or self.pending or self.problems_seen or _REGISTRY.active is not self
                or self.generation != _REGISTRY.generation):
            return None
        canonic = self.pdb.canonic
        for name, lines in breaks.items():
            before = old.get(name)
            if not covers(name, canonic) and (before is None or not lines <= before):
                return None
        seen: set[int] = set()
        functions = []
        for func, hooked, original in _REGISTRY.patched:
            code = func.__code__  # the original when a ``clear`` at the prompt gave it back (``release_cleared``)
            if (code is hooked or code is original) and identity(func) not in seen:
                seen.add(identity(func))
                functions.append(func)
        return functions

    def _rearm_now(self, breaks: dict[str, frozenset[int]], frame) -> None:
        reuse = self._reusable_functions(breaks)
        restore_all()
        self.hook_breaks = breaks
        self.code_lines.clear()
        suspended, self.suspended = self.suspended, []
        self.pending = set()
        if reuse is None:
            self.tried_late = dict(self.dynamo_read)
            self.dynamo_codes = dict(self.dynamo_read)
        else:  # dynamo's code stays dynamo's; nothing else is known not to be hookable
            self.tried_late = dict(self.dynamo_codes)
        canonic = self.pdb.canonic
        arm_guards(breaks, canonic)
        scan = {name: lines for name, lines in breaks.items() if not covers(name, canonic)}
        if scan and reuse is not None:  # no gc pass: the functions hooked before, given their code back
            memo: dict = {}
            for func in reuse:
                if canonic(func.__code__.co_filename) in scan:
                    hooked = _hooked_tree(func.__code__, self.hook_lines, memo, self.problems)
                    if hooked is not None:
                        _REGISTRY.patch(func, hooked)
            self.suspended = [ref for ref in suspended if ref() is not None and _frame_of(ref()) is not None]
        elif scan:  # files whose functions may run unguarded code: find and hook them (one gc pass)
            memo: dict = {}
            function_type = types.FunctionType
            found, wrappers = breakpoint_code_on_heap(scan, canonic, dynamo_loaded())
            if wrappers:
                self._find_dynamo_code(wrappers, scan)
            for obj, code in found:
                if type(obj) is function_type:
                    hooked = _hooked_tree(code, self.hook_lines, memo, self.problems)
                    if hooked is not None:
                        _REGISTRY.patch(obj, hooked)
                elif _frame_of(obj) is not None:
                    self.suspended.append(weakref.ref(obj))
        if breaks:
            _LOADERS.install()
            install_audit_hook()
        else:
            _LOADERS.remove()
        self.old_frames = []
        walk = frame
        while walk is not None:
            if identity(walk.f_code) not in _REGISTRY.hooked and self._may_run_breakpoint_code(walk):
                self.old_frames.append(walk)
            walk = walk.f_back
        self.problems_seen = bool(self.problems) or self.problems_seen
        _REGISTRY.generation += 1
        self.generation = _REGISTRY.generation

    def _hook_late(self, code: types.CodeType, frame=None) -> None:
        """Original code holding breakpoint lines is being called: hook its functions for the next calls."""
        if identity(code) in self.tried_late and self.tried_late[identity(code)] is code:
            return  # once per code object: it could not be hooked, or its functions were hooked already
        self.tried_late[identity(code)] = code
        if dynamo_loaded() and frame is not None and called_by_dynamo(frame.f_back):
            for nested in code_tree(code):  # torch.compile runs it: dynamo must never read a hook
                self.dynamo_codes[identity(nested)] = nested
                self.tried_late[identity(nested)] = nested
            self._say_dynamo(code)
            return
        hooked = _hooked_tree(code, self.hook_lines, {}, self.problems)
        if hooked is None:
            self.problems_seen = self.problems_seen or bool(self.problems)
            return
        for referrer in gc.get_referrers(code):
            if type(referrer) is types.FunctionType and referrer.__code__ is code:
                _REGISTRY.patch(referrer, hooked)

    def _still_needed(self) -> bool:
        """Whether the lean trace function must stay, judged without walking the stack."""
        if self.suspended:
            self.suspended = [ref for ref in self.suspended if ref() is not None and _frame_of(ref()) is not None]
        return bool(self.mode == WATCH or self.problems_seen or self.old_frames or self.pending or self.suspended)

    def _needs_trace(self, frame) -> bool:
        if self.old_frames:
            live = set()
            walk = frame
            while walk is not None:
                live.add(identity(walk))
                walk = walk.f_back
            self.old_frames = [f for f in self.old_frames if identity(f) in live]
        return self._still_needed()

    def _local_for(self, frame):
        local = super()._local_for(frame)
        if local is None and any(frame is f for f in self.old_frames):
            return self._local  # to see it return
        return local

    def activate(self, mode: str, frame):
        AUDIT_SINK.forget()
        breaks = self.pdb.fb_breakpoint_lines()
        if ((breaks is not self.hook_breaks and breaks != self.hook_breaks) or self.generation != _REGISTRY.generation
                or _REGISTRY.active is not self):
            if _REGISTRY.active is not None and _REGISTRY.active is not self:
                _REGISTRY.active.armed = False
            _REGISTRY.active = self
            self._rearm(breaks, frame)
        self.hook_breaks = breaks  # the same snapshot object: ``resume_quickly`` compares identities
        self.armed = True
        self.mode = mode
        self.thread = threading.get_ident()
        if self._needs_trace(frame):
            # only the watched frames need events: hooks report breakpoints, calls need no look-up
            only_watch = not (self.old_frames or self.pending or self.suspended or self.problems_seen)
            self.global_trace = self._calls_untraced if only_watch else self._global
            return super().activate(mode, frame)
        self._trace_off(frame)
        return None

    def resume_quickly(self, mode: str, frame) -> bool:
        """After a hooked line pdb did not stop at (a false condition), when nothing changed since arming:
        drop the one-shot trace and go on (True); else False and ``activate`` plans from scratch."""
        if (mode != self.mode or not self.armed or self.pdb.fb_breakpoint_lines() is not self.hook_breaks
                or self.generation != _REGISTRY.generation or _REGISTRY.active is not self):
            return False
        if self.active:  # the lean trace function runs (``next``, running frames): its own test
            return TraceEngine.resume_quickly(self, mode, frame)
        if mode != CONTINUE:
            return False
        if frame is not None and frame.f_trace == self._hook_local:
            frame.f_trace = None
        trace = sys.gettrace()
        if trace == self._hook_global:
            sys.settrace(None)
        elif trace is not None:
            return False
        return True

    def _trace_off(self, frame) -> None:
        if self.active:
            TraceEngine.deactivate(self)
        self.global_trace = self._global
        if sys.gettrace() in (self._global, self._hook_global, self._calls_untraced):
            sys.settrace(None)
        if frame is not None and frame.f_trace in (self._hook_local, self._local, self._watch_local):
            frame.f_trace = None

    def deactivate(self) -> None:
        """Stop reporting (pdb's own tracing takes over); the hooks stay compiled in, and do nothing,
        unless breakpoints changed since they were armed: then every function gets its original code back
        (a cleared breakpoint leaves the code as it was)."""
        self.armed = False
        if sys.gettrace() == self._hook_global:
            sys.settrace(None)
        super().deactivate()
        if self.hook_breaks and self.pdb.fb_breakpoint_lines() != self.hook_breaks:
            self._unhook()

    def _unhook(self) -> None:
        if _REGISTRY.active is self:
            _REGISTRY.active = None
            _LOADERS.remove()
            started = time.perf_counter()
            restore_all()
            self.arm_seconds += time.perf_counter() - started
        self.hook_breaks = {}
        arm_guards({}, self.pdb.canonic)
        self.dynamo_codes = dict(self.dynamo_read)
        self.old_frames = []
        self.suspended = []
        self.pending = set()

    def release_cleared(self) -> None:
        """Breakpoints were cleared at a prompt: every function gets its original code back at once (a
        program that marshals or compares ``__code__`` right after the stop sees the original); the next
        ``continue`` hooks what the remaining breakpoints need. Frames already running hooked code keep it
        (their hooks are covered as for any running frame)."""
        if not self.hook_breaks or self.pdb.fb_breakpoint_lines() == self.hook_breaks:
            return
        if _REGISTRY.untracked or _REGISTRY.active is not self:
            self._unhook()
            return
        for func, hooked, original in _REGISTRY.patched:  # the registry stays: ``continue`` re-hooks
            if func.__code__ is hooked:                    # these without a heap walk
                func.__code__ = original

    def close(self) -> None:
        """Deactivate and put every function's original code back."""
        self.deactivate()
        self._unhook()

    # ---- run time --------------------------------------------------------------------------------------
    def hit(self, frame) -> None:
        """A hook ran in ``frame``: make the coming line event reach pdb through a one-shot trace function."""
        if not self.armed or self.state["depth"] or threading.get_ident() != self.thread:
            return
        current = frame.f_trace
        exceptions_only = current is not None and getattr(current, "llmpdb_exceptions_only", False)
        if sys.gettrace() is None:  # a trace function left on the frame gets no events then: replace it
            if self.armed:  # False when a Ctrl-C was handled right after gettrace(): pdb's trace stands
                frame.f_trace, frame.f_trace_lines = self._hook_local, True
                sys.settrace(self._hook_global)
        elif current is None or exceptions_only:  # an exceptions-only `catch` frame too
            frame.f_trace, frame.f_trace_lines = self._hook_local, True
        # else already traced (a watched frame): its trace function sees the line event

    def _hook_global(self, frame, event, arg):
        return None

    def _calls_untraced(self, frame, event, arg):
        return None

    def _hook_local(self, frame, event, arg):
        if event == "line" and self.armed and not self.state["depth"]:
            return self.pdb.fb_deliver(frame, event, arg)
        if frame.f_trace == self._hook_local:  # not pdb's, installed by a Ctrl-C meanwhile (``interrupt``)
            frame.f_trace = None
        if sys.gettrace() == self._hook_global:
            sys.settrace(None)
        return None

    def _global(self, frame, event, arg):
        code = frame.f_code  # one Python frame per call: TraceEngine._global inlined
        entry = self.code_lines.get(identity(code))
        lines = entry[1] if entry is not None and entry[0] is code else self.lines_for(code)
        if not lines or self.state["depth"] or threading.get_ident() != self.thread:
            return None
        if self.armed and identity(code) not in _REGISTRY.hooked:  # first call of original breakpoint code
            self._hook_late(code, frame)  # hook its functions for the next calls
            self.old_frames.append(frame)
        return self._local

    def _local(self, frame, event, arg):
        result = super()._local(frame, event, arg)
        if event == "return" and self.armed and self.active and any(frame is f for f in self.old_frames):
            self.old_frames = [f for f in self.old_frames if f is not frame]
            if self.old_frames == [] and not self._still_needed():
                self._trace_off(None)
        return result


INVISIBLE_CODE_IDS.add(identity(HookEngine.hit.__code__))  # ``step`` onto a hooked line never enters it
register_delivery(HookEngine._global, HookEngine._local, HookEngine._hook_local, HookEngine._hook_global,
                  HookEngine._calls_untraced, HookEngine.hit)


def _frame_of(generator):
    return getattr(generator, "gi_frame", None) or getattr(generator, "cr_frame", None) or getattr(
        generator, "ag_frame", None)
