"""The lean trace-function engine of fast breakpoints: the fallback of the others.

Used directly on Python 3.12+ when no ``sys.monitoring`` tool id is free, and by the 3.11 hook engine
(``breakpoints_hooks``) where hooks cannot reach (``next``, frames already running original code).

Usage: created by ``FastBreakpointsMixin`` (``llmpdb.breakpoints.mixin``); ``engine.activate(mode, frame)``
returns the local trace function for ``frame``; ``engine.deactivate()`` removes the global one.

Before Python 3.12 a frame's local trace function only runs while a global one is installed, so this
engine keeps one, but a lean one: on each call it looks the code object up in a dictionary and traces the
function only when that code object holds a breakpoint line (pdb traces every function of a file that
holds a breakpoint, and runs ``stop_here``/``break_anywhere`` in Python on every call). Lines of traced
functions reach pdb only when they are breakpoint lines. In WATCH mode (``next``/``until``/``return``) the
watched frames get every event. The interpreter still runs in its slower tracing mode while the global
function is installed: see ``docs/design.md`` for the numbers.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from .engine import ALL_LINES, WATCH, EngineBase, identity
from .interrupt import register_delivery

__all__ = ["TraceEngine"]



class TraceEngine(EngineBase):
    """Delivers CONTINUE/WATCH events to ``pdb.fb_deliver`` through a lean ``sys.settrace`` function."""

    def __init__(self, pdb: Any):
        self.pdb = pdb
        self.state = pdb._fb_state()  # state["depth"] > 0 while pdb handles an event: deliver nothing
        self.active = False
        self.thread = threading.get_ident()
        self.breaks: dict[str, frozenset[int]] = {}
        self.code_lines: dict[int, tuple[Any, frozenset[int]]] = {}  # identity(code) -> (code, lines)
        self.watched: tuple = ()
        self.key: tuple | None = None
        self.global_trace = self._global  # the global trace function activate() installs
        self.problems: list[str] = []
        self.arm_seconds = 0.0  # time spent arming and releasing (reported by the benchmark)

    def _is_watched(self, frame) -> bool:
        for watched in self.watched:
            if frame is watched:
                return True
        return False

    def _local_for(self, frame):
        if self._is_watched(frame):
            return self._watch_local
        if self.lines_for(frame.f_code):
            return self._local
        return None

    def activate(self, mode: str, frame):
        """Deliver the events of ``mode`` from now on; returns the local trace function for ``frame``."""
        pdb = self.pdb
        breaks = pdb.fb_breakpoint_lines()
        watched = pdb.fb_watched_frames() if mode == WATCH else ()
        key = (mode, tuple(identity(f) for f in watched))
        self.watch_seen = (pdb.stopframe, pdb.returnframe, pdb.stoplineno)
        unchanged = self.active and key == self.key and breaks == self.breaks and sys.gettrace() == self.global_trace
        if breaks == self.breaks:
            self.breaks = breaks  # the same snapshot object: ``resume_quickly`` compares identities
        if not unchanged:
            if breaks != self.breaks:
                self.breaks = breaks
                self.code_lines.clear()
            self.watched, self.key = watched, key
            self.thread = threading.get_ident()
            walk = frame.f_back if frame is not None else None
            while walk is not None:  # frames already running get their local trace function now
                local = self._local_for(walk)
                if local is not None or walk.f_trace in (self._local, self._watch_local):
                    walk.f_trace = local
                walk = walk.f_back
            for watched_frame in watched:
                watched_frame.f_trace = self._watch_local
            self.active = True
            sys.settrace(self.global_trace)
        if frame is None:
            return None
        local = self._local_for(frame)
        frame.f_trace = local
        return local

    def resume_quickly(self, mode: str, frame) -> bool:
        return self.active and EngineBase.resume_quickly(self, mode, frame) and sys.gettrace() == self.global_trace

    def refresh(self) -> None:
        """Breakpoints changed while running: re-arm from the caller's stack."""
        if self.active:
            self.key = None
            self.activate(self.pdb.fast_breakpoints_mode(), sys._getframe(1))

    def deactivate(self) -> None:
        """Remove the global trace function; local ones left on frames fall back to pdb's dispatch."""
        if self.active:
            self.active = False
            self.key = None
            self.watched = ()
            if sys.gettrace() in (self._global, self.global_trace):
                sys.settrace(None)
            self.code_lines.clear()

    # ---- trace functions -----------------------------------------------------------------------------
    def _global(self, frame, event, arg):
        entry = self.code_lines.get(identity(frame.f_code))
        lines = entry[1] if entry is not None and entry[0] is frame.f_code else self.lines_for(frame.f_code)
        if lines and threading.get_ident() == self.thread and not self.state["depth"]:
            return self._local
        return None

    def _local(self, frame, event, arg):
        if not self.active:
            return self.pdb.trace_dispatch(frame, event, arg)
        if event == "line" and not self.state["depth"]:
            lines = self.lines_for(frame.f_code)
            if lines is ALL_LINES or frame.f_lineno in lines:
                return self.pdb.fb_deliver(frame, event, arg)
        return self._local

    def _watch_local(self, frame, event, arg):
        if not self.active:
            return self.pdb.trace_dispatch(frame, event, arg)
        if self._is_watched(frame) and not self.state["depth"]:
            return self.pdb.fb_deliver(frame, event, arg)
        return self._local(frame, event, arg)


register_delivery(TraceEngine._global, TraceEngine._local, TraceEngine._watch_local)
