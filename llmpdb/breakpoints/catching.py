"""Exception breakpoints: pause where a matching exception is raised, in the raising frame, before any handler.

Usage::

    from llmpdb.breakpoints.catching import CATCHES
    CATCHES.stopper = debugger.catch_stop          # called as stopper(frame, exc, tb, catch, note)
    CATCHES.add("*Error", 'if "shape" in str(e)')  # -> Catch(number=1, ...); watching starts
    CATCHES.remove(1)                              # watching stops with the last one

A pattern is a glob matched against every class of the exception's ``__mro__`` (name, qualified name or
``module.qualname``), so ``RuntimeError`` also catches torch's ``OutOfMemoryError``. The condition is
evaluated in the raising frame with the exception bound to ``e``; one that raises stops (and says why).
An exception counts where it starts: its traceback has one entry, the raising frame, so the same
exception passing through the callers does not stop again. Raises inside llmpdb, pdb or bdb, and any while
the debugger is interacting (``paused``), are ignored; so are raises in a library's code (the standard
library, installed packages) while an import runs it (``import numpy`` raises and handles RuntimeErrors),
unless the pattern names a module (``catch numpy.*``). An import that fails reaches the user's
``import`` line as an uncaught error.

How raises are seen:
- Python 3.12+: ``sys.monitoring`` ``RAISE`` events on a tool id of our own (5, else 4, else 3: the line
  engine takes 0, 3, 4 in that order); no trace function, nothing while no exception is raised.
- Python 3.11: a global trace function that turns line events off in every frame it sees called
  (``f_trace_lines = False``) and keeps only ``exception`` events: every Python call pays a trace call
  while a catch is armed (``bench/catch_bench.py`` measures it). ``rearm()`` puts it back after pdb's own
  tracing (stepping) removed it.
"""

from __future__ import annotations

import fnmatch
import os
import re
import sys
from typing import Any, Callable

from .tool_ids import take_tool_id

__all__ = ["Catch", "Catches", "CATCHES", "exception_matches", "valid_pattern", "backend_name"]

_MON = getattr(sys, "monitoring", None)
TOOL_IDS = (5, 4, 3)
TOOL_NAME = "llmpdb catch"
_PATTERN = re.compile(r"^[\w.*?\[\]!]+$")
_LLMPDB_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_DEBUGGER_FILES = {"bdb.py", "pdb.py", "cmd.py", "pdbpp.py", "fancycompleter.py"}
_IMPORT_FILES = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")
_LIBRARY_DIRS: tuple[str, ...] = ()


def _library_dirs() -> tuple[str, ...]:
    """The standard library's and the installed packages' folders (``sysconfig``), computed once."""
    global _LIBRARY_DIRS
    if not _LIBRARY_DIRS:
        import sysconfig
        paths = sysconfig.get_paths()
        _LIBRARY_DIRS = tuple(sorted({os.path.abspath(paths[key]) + os.sep
                                      for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}))
    return _LIBRARY_DIRS


def _in_library_import(frame, limit: int = 200) -> bool:
    """A raise in a library's code while an import runs it (numpy's import raises and handles RuntimeErrors):
    the raising frame is in the standard library or an installed package, and importlib is on the stack."""
    filename = frame.f_code.co_filename
    if not (filename.startswith(_IMPORT_FILES) or filename.startswith(_library_dirs())):
        return False
    while frame is not None and limit > 0:
        if frame.f_code.co_filename in _IMPORT_FILES:
            return True
        frame, limit = frame.f_back, limit - 1
    return False


class Catch:
    """One exception breakpoint: its number, glob, optional condition (``e`` is the exception), hits."""

    __slots__ = ("number", "pattern", "condition", "hits", "code")

    def __init__(self, number: int, pattern: str, condition: str | None = None, hits: int = 0):
        self.number, self.pattern, self.condition, self.hits = number, pattern, condition, hits
        # the compiled condition; a SyntaxError is the caller's
        self.code: Any = compile(condition, "<catch condition>", "eval") if condition else None

    def __repr__(self) -> str:
        return f"Catch(number={self.number}, pattern={self.pattern!r}, condition={self.condition!r}, hits={self.hits})"


def valid_pattern(pattern: str) -> bool:
    """Usage: ``valid_pattern("*Error")`` -> True; names, dots and glob characters only."""
    return bool(_PATTERN.match(pattern))


def exception_matches(pattern: str, exc_type: type) -> bool:
    """Usage: ``exception_matches("*Error", RuntimeError)`` -> True; any class of the MRO may match."""
    for klass in exc_type.__mro__:
        if klass is object:
            continue
        names = (klass.__name__, klass.__qualname__, f"{klass.__module__}.{klass.__qualname__}")
        if any(fnmatch.fnmatchcase(name, pattern) for name in names):
            return True
    return False


def _is_debugger_code(frame) -> bool:
    filename = frame.f_code.co_filename
    return filename.startswith(_LLMPDB_DIR) or os.path.basename(filename) in _DEBUGGER_FILES


def backend_name() -> str:
    """Usage: ``backend_name()`` -> ``"sys.monitoring"`` or ``"trace function"``."""
    return "sys.monitoring" if _MON is not None else "trace function"


class _MonitoringBackend:
    """3.12+: RAISE events on our own tool id; nothing else is enabled."""

    def __init__(self, on_raise: Callable[[Any, BaseException, Any], None]):
        self.on_raise = on_raise
        self.tool: int | None = None

    def start(self) -> None:
        if self.tool is not None:
            return
        self.tool = take_tool_id(TOOL_IDS, TOOL_NAME)
        if self.tool is None:
            raise RuntimeError(f"no free sys.monitoring tool id (tried {TOOL_IDS})")
        _MON.register_callback(self.tool, _MON.events.RAISE, self._raised)
        _MON.set_events(self.tool, _MON.events.RAISE)

    def _raised(self, code, offset, exc):
        self.on_raise(sys._getframe(1), exc, exc.__traceback__)

    def stop(self) -> None:
        tool, self.tool = self.tool, None
        if tool is not None:
            _MON.set_events(tool, 0)
            _MON.register_callback(tool, _MON.events.RAISE, None)
            _MON.free_tool_id(tool)

    def rearm(self) -> None:
        """Nothing to do: monitoring events do not depend on pdb's trace function."""


class _TraceBackend:
    """3.11: a global trace function keeping only ``exception`` events in the frames it sees."""

    def __init__(self, on_raise: Callable[[Any, BaseException, Any], None]):
        self.on_raise = on_raise
        self.running = False

        def local(frame, event, arg):
            if event == "exception":
                on_raise(frame, arg[1], arg[2])
                return frame.f_trace  # a stop may have handed the frame to pdb's trace function
            return local

        def call(frame, event, arg):
            frame.f_trace_lines = False
            return local

        local.llmpdb_exceptions_only = True  # the line engine's hooks may take such a frame over
        self.local, self.call = local, call

    def start(self) -> None:
        self.running = True
        self.rearm()

    def rearm(self) -> None:
        """Install the trace function and watch the running frames; while pdb's own trace function runs
        (stepping), leave the frames to it."""
        if not self.running or sys.gettrace() is self.call:
            return
        if sys.gettrace() is not None:
            self.release_frames()
            return
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_trace is None:
                frame.f_trace = self.local
                frame.f_trace_lines = False
            frame = frame.f_back
        sys.settrace(self.call)

    def stop(self) -> None:
        self.running = False
        if sys.gettrace() is self.call:
            sys.settrace(None)
        self.release_frames()

    def release_frames(self) -> None:
        """Give the running frames back to pdb (it steps): line events on, our local function off."""
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_trace is self.local:
                frame.f_trace = None
                frame.f_trace_lines = True
            frame = frame.f_back


class Catches:
    """The process's exception breakpoints and the backend that watches raises while any is set."""

    def __init__(self) -> None:
        self.items: list[Catch] = []
        self.paused = 0
        self.stopper: Callable[[Any, BaseException, Any, Catch, str | None], None] | None = None
        self._next = 1
        self._matching: dict[type, list[Catch]] = {}  # per exception class; emptied when catches change
        # The raise the last catch stop was for, (exception, frame): the same raise reported again (by pdb's
        # tracing after sys.monitoring, or the other way round) is the same stop. Dropped at the next raise.
        self._stopped_at: tuple | None = None
        backend = _MonitoringBackend if _MON is not None else _TraceBackend
        self.backend = backend(self.on_raise)

    def add(self, pattern: str, condition: str | None = None) -> Catch:
        """Usage: ``CATCHES.add("RuntimeError")``; numbers are never reused within a process."""
        catch = Catch(self._next, pattern, condition)
        self._next += 1
        self.items.append(catch)
        self._matching.clear()
        self.backend.start()
        return catch

    def remove(self, number: int | None = None) -> list[Catch]:
        """Usage: ``CATCHES.remove(2)`` or ``CATCHES.remove()`` (all); returns what was removed."""
        removed = [c for c in self.items if number is None or c.number == number]
        self.items = [c for c in self.items if c not in removed]
        self._stopped_at = None
        self._matching.clear()
        if not self.items:
            self.backend.stop()
        return removed

    def reset(self) -> None:
        """Remove every catch and number from 1 again (tests)."""
        self.remove()
        self._next = 1

    def rearm(self) -> None:
        """After a stop: watch again when nothing traces, else leave the frames to pdb's tracing."""
        if self.items:
            self.backend.rearm()

    def frame_tracer(self):
        """3.11 while armed: the local trace function a frame needs for its raises to be seen, else None."""
        return self.backend.local if self.items and isinstance(self.backend, _TraceBackend) else None

    def on_raise(self, frame, exc: BaseException, tb) -> bool:
        """A raise seen by the backend: stop through ``stopper`` when it starts here and a catch matches.
        Returns whether it stopped."""
        if self.paused or not self.items or self.stopper is None:
            return False
        stopped_at = self._stopped_at
        if stopped_at is not None:
            if stopped_at[0] is exc and stopped_at[1] is frame:
                return True  # reported a second time: the stop was made
            self._stopped_at = None  # another raise: the exception and its frames are not kept alive
        if tb is None or tb.tb_next is not None or tb.tb_frame is not frame:
            return False  # passing through a caller, or raised from C code without a frame of ours
        matched = self._matching.get(type(exc))
        if matched is None:
            matched = self._matching[type(exc)] = [c for c in self.items if exception_matches(c.pattern, type(exc))]
        if not matched or _is_debugger_code(frame):
            return False
        if all("." not in c.pattern for c in matched) and _in_library_import(frame):
            return False  # a library's import at work; `catch numpy.*`-style patterns (a module) still stop
        self.paused += 1
        try:
            hit = next(((c, note) for c in matched for ok, note in [self._holds(c, frame, exc)] if ok), None)
        finally:
            self.paused -= 1
        if hit is None:
            return False
        hit[0].hits += 1
        self._stopped_at = (exc, frame)
        self.stopper(frame, exc, tb, hit[0], hit[1])
        return True

    @staticmethod
    def _holds(catch: Catch, frame, exc: BaseException) -> tuple[bool, str | None]:
        if not catch.condition:
            return True, None
        try:
            return bool(eval(catch.code, frame.f_globals, {**frame.f_locals, "e": exc})), None
        except BaseException as err:  # the user's condition: never lets anything escape into the program
            return True, f"condition {catch.condition!r} raised {type(err).__name__}: {err}; stopping"


CATCHES = Catches()
