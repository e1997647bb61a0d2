"""Fast breakpoints: run to a breakpoint without a trace function on every call.

Usage::

    class Pdb(FastBreakpointsMixin, pdb.Pdb): ...      # in front of pdb.Pdb or pdb++'s Pdb

pdb keeps ``sys.settrace`` installed while breakpoints exist, so every Python call pays, and every line of
a file holding a breakpoint pays. This mixin leaves pdb's decisions (``stop_here``, ``break_here``,
conditions, ignore counts, temporary breakpoints, ``user_*``) untouched and changes only how events reach
``trace_dispatch``. After every event that pdb handles it looks at what pdb now waits for:

- ``continue`` with breakpoints: only line events at breakpoint lines are needed;
- ``next``/``until``/``return`` in an ordinary function: the events of the one or two frames named by
  ``stopframe``/``returnframe``, plus the breakpoint lines;
- anything else (``step``, instruction steps, generator frames, quitting): pdb's own ``sys.settrace``.

An engine delivers the first two: ``sys.monitoring`` with events enabled only on the code objects that
need them (Python 3.12+, ``monitoring``); hooks compiled into the code objects holding
breakpoint lines (Python 3.11, ``hooked``); or a lean trace function that traces only those
code objects (where neither applies, ``trace``). See ``docs/design.md``, "Fast breakpoints".
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

from .engine import CONTINUE, GENERATOR_FLAGS, INVISIBLE_CODE_IDS, OFF, STOCK, WATCH, identity
from .interrupt import SafeInterruptMixin, register_delivery

__all__ = ["FastBreakpointsMixin", "engine_kind"]


def engine_kind() -> str:
    """Usage: ``engine_kind()`` -> ``"monitoring"`` (3.12+, a tool id free), ``"hooks"`` (3.11) or ``"trace"``."""
    if sys.version_info >= (3, 12):
        from .monitoring import free_tool_id_available

        if free_tool_id_available():
            return "monitoring"
        return "trace"
    from .bytecode import SUPPORTED

    return "hooks" if SUPPORTED else "trace"


def _new_engine(pdb: Any):
    kind = engine_kind()
    if kind == "monitoring":
        from .monitoring import MonitoringEngine

        return MonitoringEngine(pdb)
    if kind == "hooks":
        from .hooked import HookEngine

        return HookEngine(pdb)
    from .trace import TraceEngine

    return TraceEngine(pdb)


class FastBreakpointsMixin(SafeInterruptMixin):
    """Mixin for a ``bdb.Bdb`` subclass (``pdb.Pdb``, pdb++): the same pdb, without a global trace while
    continuing to breakpoints or stepping over a call with ``next``.

    Public extras: ``fast_breakpoints_mode()`` (what the engine delivers now: ``"stock"``, ``"continue"``,
    ``"watch"`` or ``"off"``), ``fast_breakpoints_close()`` (release the engine: monitoring tool, trace
    function), ``fast_breakpoints_enabled`` (class or instance attribute; ``False`` keeps stock pdb).
    """

    fast_breakpoints_enabled: bool = True

    # ---- state ------------------------------------------------------------------------------------
    def _fb_state(self) -> dict:
        state = self.__dict__.get("_fb")
        if state is None:
            state = {"engine": None, "depth": 0, "mode": STOCK, "stock_off": False, "traced": [], "breaks_gen": 0,
                     "lines": None}
            self.__dict__["_fb"] = state
        return state

    def _fb_engine(self):
        state = self._fb_state()
        if state["engine"] is None:
            state["engine"] = _new_engine(self)
        return state["engine"]

    def fast_breakpoints_mode(self) -> str:
        """Usage: ``pdb.fast_breakpoints_mode()`` -> the delivery mode in force (``"stock"`` before any)."""
        return self._fb_state()["mode"]

    def fast_breakpoints_close(self) -> None:
        """Usage: ``pdb.fast_breakpoints_close()``; release the engine (monitoring tool id, trace function)."""
        state = self._fb_state()
        if state["engine"] is not None:
            state["engine"].close()
        state["mode"] = STOCK
        state["stock_off"] = False
        state["traced"].clear()

    # ---- which events pdb waits for -----------------------------------------------------------------
    def _fb_wanted_mode(self) -> str:
        if self.quitting:
            return OFF
        if not self.fast_breakpoints_enabled or getattr(self, "trace_opcodes", False):
            return STOCK
        stopframe = self.stopframe
        if self.stoplineno == -1:
            # ``continue`` sets stopframe = botframe; a generator ``return`` uses stopframe = that frame,
            # whose StopIteration/GeneratorExit in other frames pdb still reports: leave that to pdb.
            if stopframe is None or stopframe is not self.botframe:
                return STOCK
            if stopframe.f_code.co_flags & GENERATOR_FLAGS:
                return STOCK
            return CONTINUE if self.breaks else OFF
        if stopframe is None:
            return STOCK  # step: stop at the next event anywhere
        for frame in (stopframe, self.returnframe):
            if frame is not None and frame.f_code.co_flags & GENERATOR_FLAGS:
                return STOCK
        return WATCH

    def fb_watched_frames(self) -> tuple:
        """The frames whose every event pdb needs in WATCH mode (``stopframe``, ``returnframe``)."""
        frames = []
        for frame in (self.stopframe, self.returnframe):
            if frame is not None and all(frame is not f for f in frames):
                frames.append(frame)
        return tuple(frames)

    def fb_breakpoint_lines(self) -> dict[str, frozenset[int]]:
        """Snapshot of ``self.breaks`` as ``{canonic filename: frozenset(lines)}`` (the same object until
        ``set_break``/``clear_*``/``reset`` run: engines compare it after every event)."""
        state = self._fb_state()
        cached = state["lines"]
        if cached is not None and cached[0] == state["breaks_gen"]:
            return cached[1]
        lines = {filename: frozenset(lines) for filename, lines in self.breaks.items() if lines}
        state["lines"] = (state["breaks_gen"], lines)
        return lines

    # ---- event delivery -------------------------------------------------------------------------------
    def trace_dispatch(self, frame, event, arg):
        if identity(frame.f_code) in INVISIBLE_CODE_IDS:
            return None  # the engine's own hook function: pdb never stops in it
        state = self._fb_state()
        state["depth"] += 1
        try:
            result = super().trace_dispatch(frame, event, arg)
        finally:
            state["depth"] -= 1
        if state["depth"] == 0 and (state["mode"] != STOCK or self._fb_wanted_mode() != STOCK):
            local = self.fb_sync(frame)
            if local is not _KEEP:
                return local
        return result

    def fb_deliver(self, frame: FrameType, event: str, arg: Any):
        """Engine entry: hand one event to pdb's own ``trace_dispatch``, then re-plan the engine.

        Returns the local trace function the frame should get (trace engine), or None. An event of a watched
        frame after which pdb waits for exactly what it waited for before (the same stop state, breakpoints
        and trace function) leaves the plan as it is, without asking the engine."""
        state = self._fb_state()
        local = _KEEP
        traced = state["traced"]
        for seen in traced:
            if seen is frame:
                break
        else:
            traced.append(frame)  # pdb would have traced a frame it got events from
        watching = state["mode"] == WATCH and (frame is self.stopframe or frame is self.returnframe)
        if watching:
            before = (self.stopframe, self.returnframe, self.stoplineno, self.quitting, state["breaks_gen"],
                      self.llmpdb_interrupts, sys.gettrace())
        # a return pdb handles (not a generator's yield while it waits for another frame): afterwards the
        # caller runs, and pdb may stop there (`n`/`s` at a --Return--); 3.13's bdb then traces the caller.
        # Under the engine the caller ran untraced, so 3.12 went on to the next traced frame, past it
        caller_next = (event == "return" and frame.f_back is not None and frame.f_back is not self.botframe
                       and (frame is self.returnframe or self.stop_here(frame))
                       and not (self.stopframe and frame.f_code.co_flags & GENERATOR_FLAGS))
        state["depth"] += 1
        try:
            super().trace_dispatch(frame, event, arg)
        finally:
            state["depth"] -= 1
            if caller_next and self.stoplineno != -1 and all(f is not frame.f_back for f in traced):
                traced.append(frame.f_back)
            if state["depth"] == 0:
                if watching and state["mode"] == WATCH and before == (
                        self.stopframe, self.returnframe, self.stoplineno, self.quitting, state["breaks_gen"],
                        self.llmpdb_interrupts, sys.gettrace()):
                    local = None
                else:
                    local = self.fb_sync(frame)
        return None if local is _KEEP else local

    def fb_sync(self, frame: FrameType | None):
        """Make the event machinery match what pdb waits for now; ``frame`` is where the last event was.

        Returns the local trace function for ``frame`` (``_KEEP`` when pdb's own return value stands).
        A Ctrl-C handled meanwhile (``interrupt``) changed what pdb waits for: plan again."""
        while True:
            seen = self.llmpdb_interrupts
            local = self._fb_sync_once(frame)
            if self.llmpdb_interrupts == seen:
                return local

    def _fb_sync_once(self, frame: FrameType | None):
        state = self._fb_state()
        wanted = self._fb_wanted_mode()
        if wanted == state["mode"] and state["stock_off"] and state["engine"] is not None:
            if state["engine"].resume_quickly(wanted, frame):
                if len(state["traced"]) > 8:  # frames that got events: forget those that finished
                    self._fb_prune_traced(frame)
                return None
        engine = self._fb_engine() if wanted in (CONTINUE, WATCH) else state["engine"]
        previous = state["mode"]
        state["mode"] = wanted
        if wanted in (CONTINUE, WATCH):
            if not state["stock_off"] or self._fb_is_stock_trace(sys.gettrace()):
                self._fb_stock_off(frame)
                state["stock_off"] = True
            elif len(state["traced"]) > 8:  # now and then, not at every false condition: it walks the stack
                self._fb_prune_traced(frame)
            local = engine.activate(wanted, frame)
            for problem in engine.take_problems():
                self.message(f"*** llmpdb fast breakpoints: {problem}")
            return local
        if engine is not None:
            engine.deactivate()
        if wanted == STOCK and state["stock_off"]:
            state["stock_off"] = False
            return self._fb_stock_on(frame)
        state["stock_off"] = False
        if wanted == OFF and previous != STOCK:
            sys.settrace(None)
            if frame is not None:
                frame.f_trace = None
            return None
        return _KEEP

    def _fb_is_stock_trace(self, trace: Any) -> bool:
        return getattr(trace, "__self__", None) is self and getattr(trace, "__name__", "") == "trace_dispatch"

    def _fb_stock_off(self, frame: FrameType | None) -> None:
        """Remove pdb's global and local trace functions, as ``set_continue`` does without breakpoints.

        The frames that had pdb's local trace function are remembered: pdb would still trace them when
        stepping resumes (a step that returns into an untraced caller does not stop there on 3.11)."""
        sys.settrace(None)
        traced = self._fb_state()["traced"]
        walk = sys._getframe()
        while walk is not None:
            if walk.f_trace is not None and self._fb_is_stock_trace(walk.f_trace):
                walk.f_trace = None
                if all(walk is not f for f in traced):
                    traced.append(walk)
            walk = walk.f_back
        saved = getattr(self, "frame_trace_lines_opcodes", None)  # Python 3.13 set_trace bookkeeping
        if saved:
            for traced_frame, (lines, opcodes) in saved.items():
                traced_frame.f_trace_lines, traced_frame.f_trace_opcodes = lines, opcodes
            self.frame_trace_lines_opcodes = {}

    def _fb_prune_traced(self, frame: FrameType | None) -> None:
        """Forget remembered frames that are no longer running (they would keep their locals alive)."""
        traced = self._fb_state()["traced"]
        if not traced:
            return
        live = set()
        walk = frame
        while walk is not None:
            live.add(identity(walk))
            walk = walk.f_back
        traced[:] = [f for f in traced if identity(f) in live]

    def _fb_stock_on(self, frame: FrameType | None):
        """Give control back to pdb's ``sys.settrace`` machinery.

        Local trace functions go where pdb would have them: the current frame, frames pdb traced before,
        frames that received events, and frames of files holding breakpoints (pdb's ``dispatch_call``)."""
        state = self._fb_state()
        self._fb_prune_traced(frame)
        traced = state["traced"]
        # the frames pdb waits for, and the caller of a generator or coroutine it waits in: pdb hears of
        # its end there (3.11/3.12 stop at the caller's StopIteration, 3.13 traces the caller); called
        # while the engine ran, they were untraced, and `n`/`r` out of an awaited coroutine ran to the end
        waited = [self.stopframe, self.returnframe]
        stop = self.stopframe
        if stop is not None and stop.f_code.co_flags & GENERATOR_FLAGS and stop.f_back is not self.botframe:
            waited.append(stop.f_back)
        walk = frame
        while walk is not None:
            if walk.f_trace is None and (walk is frame or any(walk is f for f in traced)
                                         or any(walk is f for f in waited) or self.break_anywhere(walk)):
                walk.f_trace = self.trace_dispatch
            if walk is self.botframe:
                break
            walk = walk.f_back
        traced.clear()
        if frame is not None:
            frame.f_trace = self.trace_dispatch
        sys.settrace(self.trace_dispatch)
        return self.trace_dispatch

    # ---- bdb methods that change what must be delivered ------------------------------------------------
    def _fb_breaks_changed(self, cleared: bool = False) -> None:
        state = self._fb_state()
        state["breaks_gen"] += 1
        engine = state["engine"]
        if state["depth"] == 0 and state["mode"] in (CONTINUE, WATCH) and engine is not None:
            engine.refresh()  # changed from outside a stop, e.g. another thread or an API call
        elif cleared and state["depth"] and engine is not None:
            engine.release_cleared()  # at a prompt: the code goes back as it was now, not at the next command

    def set_break(self, *args, **kwargs):
        result = super().set_break(*args, **kwargs)
        self._fb_breaks_changed()
        return result

    def clear_break(self, *args, **kwargs):
        result = super().clear_break(*args, **kwargs)
        self._fb_breaks_changed(cleared=True)
        return result

    def clear_bpbynumber(self, *args, **kwargs):
        result = super().clear_bpbynumber(*args, **kwargs)
        self._fb_breaks_changed(cleared=True)
        return result

    def clear_all_file_breaks(self, *args, **kwargs):
        result = super().clear_all_file_breaks(*args, **kwargs)
        self._fb_breaks_changed(cleared=True)
        return result

    def clear_all_breaks(self, *args, **kwargs):
        result = super().clear_all_breaks(*args, **kwargs)
        self._fb_breaks_changed(cleared=True)
        return result

    def set_quit(self):
        super().set_quit()
        if self._fb_state()["depth"] == 0:
            self.fast_breakpoints_close()

    def reset(self):
        super().reset()
        state = self._fb_state()
        state["breaks_gen"] += 1
        if state["depth"] == 0 and state["mode"] != STOCK:
            # a new session (``set_trace`` at the next ``breakpoint()``): stop delivering, keep what was
            # armed (3.11 hooks stay compiled in, idle) so that the next ``continue`` re-arms cheaply
            if state["engine"] is not None:
                state["engine"].deactivate()
            state["mode"] = STOCK
            state["stock_off"] = False
            state["traced"].clear()

    # ---- runs that end: release the engine with pdb's trace function --------------------------------
    def _run(self, target):
        """``python -m llmpdb script.py``: on 3.11 the script is compiled with guarded hooks (``guards``)."""
        if (self.fast_breakpoints_enabled and type(target).__name__ == "_ScriptTarget" and isinstance(target, str)
                and engine_kind() == "hooks"):
            from .guards import GuardedScript

            target = GuardedScript(target)
        return super()._run(target)

    def run(self, *args, **kwargs):
        try:
            return super().run(*args, **kwargs)
        finally:
            self.fast_breakpoints_close()

    def runeval(self, *args, **kwargs):
        try:
            return super().runeval(*args, **kwargs)
        finally:
            self.fast_breakpoints_close()

    def runcall(self, *args, **kwargs):
        try:
            return super().runcall(*args, **kwargs)
        finally:
            self.fast_breakpoints_close()


register_delivery(FastBreakpointsMixin.trace_dispatch, FastBreakpointsMixin.fb_deliver)


class _Keep:
    def __repr__(self) -> str:
        return "<keep pdb's local trace>"


_KEEP = _Keep()
