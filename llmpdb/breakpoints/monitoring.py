"""The ``sys.monitoring`` engine of fast breakpoints (Python 3.12+).

Usage: created by ``FastBreakpointsMixin`` (``llmpdb.breakpoints.mixin``); ``engine.activate(mode, frame)``
after each event pdb handled, ``engine.deactivate()`` to release the tool id.

One tool id named ``"llmpdb"`` (``DEBUGGER_ID``, else 3 or 4). Events:

- ``PY_START``/``PY_RESUME`` globally, each answered with ``DISABLE``: every code object is looked at
  once; one that holds a breakpoint line gets local ``LINE``/``JUMP`` events. The constructor of dynamo's
  translator is the exception: it stays heard, so code ``torch.compile`` traces gets its note
  (``monitoring_dynamo``);
- ``LINE`` on those code objects: a breakpoint line goes to pdb (in the debugged thread); any other line
  answers ``DISABLE`` and is never reported again until breakpoints change (``restart_events``);
- ``JUMP``: a backward jump within one line is a line event for ``sys.settrace``, so it is one here;
- WATCH mode (``next``/``until``/``return``): ``PY_RETURN``/``STOP_ITERATION`` on the code of the watched
  frames, ``LINE``/``JUMP`` on the code of ``stopframe`` only (the frame pdb stops in at a line: lines of
  ``returnframe`` alone never stop), ``RAISE``/``PY_UNWIND`` globally (they cannot be local; the
  callbacks turn other code away by identity first: a ``generate()`` raises 700 times). A line of the
  stop frame below ``stoplineno`` (``until``) answers ``DISABLE`` (events are restarted when the plan
  changes); events of other frames running the same code are ignored. For ``return`` (``stopframe`` is
  the caller of ``returnframe``, no line limit) nothing can stop in the caller before ``returnframe``'s own
  return or unwind, where pdb stops: until then only ``returnframe``'s code is watched, and no ``RAISE``
  (an exception inside ``returnframe`` never stops pdb there). Its caller is usually torch's
  ``Module._call_impl``, which every module call within the forward runs (its lines cost ``return`` out of
  a forward a fifth of the forward's time); after that return, if pdb did not stop, the caller is
  watched as usual;
- a breakpoint line whose breakpoints all carry a condition has the conditions evaluated in the callback
  (``conditions.ConditionCache``): pdb hears of it only when one is true, raises, or cannot be judged.

Events are translated exactly as CPython's ``sys.settrace`` emulation does (``Python/legacy_tracing.c``).
"""

from __future__ import annotations

import dis
import sys
import threading
from typing import Any

from .conditions import ConditionCache
from .engine import ALL_LINES, WATCH, EngineBase, identity
from .interrupt import register_delivery
from .monitoring_dynamo import DynamoNote, is_translator_init
from .tool_ids import take_tool_id

__all__ = ["MonitoringEngine", "free_tool_id_available", "TOOL_NAME", "TOOL_IDS"]

TOOL_NAME = "llmpdb"
_get_ident = threading.get_ident
_MON = getattr(sys, "monitoring", None)
TOOL_IDS = (_MON.DEBUGGER_ID, 3, 4) if _MON is not None else ()


def free_tool_id_available() -> bool:
    """Usage: ``free_tool_id_available()`` -> True when ``sys.monitoring`` has a tool id llmpdb may take."""
    return _MON is not None and any(_MON.get_tool(tool) is None for tool in TOOL_IDS)


_RETURN_OPCODES = frozenset(dis.opmap[name] for name in ("RETURN_VALUE", "RETURN_CONST") if name in dis.opmap)

if _MON is not None:
    _E = _MON.events
    _DISABLE = _MON.DISABLE
    _BP_EVENTS = _E.LINE | _E.JUMP
    _WATCH_EVENTS = _E.LINE | _E.JUMP | _E.PY_RETURN | _E.STOP_ITERATION
    _RETURN_EVENTS = _E.PY_RETURN | _E.STOP_ITERATION
    _GLOBAL_CONTINUE = _E.PY_START | _E.PY_RESUME
    _GLOBAL_WATCH = _GLOBAL_CONTINUE | _E.RAISE | _E.PY_UNWIND
    _GLOBAL_RETURNING = _GLOBAL_CONTINUE | _E.PY_UNWIND  # ``return``: an exception in returnframe never stops


class MonitoringEngine(DynamoNote, EngineBase):
    """Delivers CONTINUE/WATCH events to ``pdb.fb_deliver`` through ``sys.monitoring``."""

    def __init__(self, pdb: Any):
        self.pdb = pdb
        self.state = pdb._fb_state()  # state["depth"] > 0 while pdb handles an event: deliver nothing
        self.tool: int | None = None
        self.thread = threading.get_ident()
        self.breaks: dict[str, frozenset[int]] = {}
        self.code_lines: dict[int, tuple[Any, frozenset[int]]] = {}  # identity(code) -> (code, lines)
        self.local: dict[int, tuple[Any, int]] = {}  # identity(code) -> (code, events enabled)
        self.line_maps: dict[int, tuple[Any, dict[int, int]]] = {}
        self.watched: tuple = ()
        self.watched_codes: set[int] = set()
        self.line_codes: set[int] = set()  # identity of stopframe's code in WATCH mode: every line matters
        self.stop_frame = None  # pdb.stopframe in WATCH mode
        self.stop_lineno = 0  # pdb.stoplineno in WATCH mode: lines below it in stop_frame never stop
        self.watch_disabled = False  # a watched line answered DISABLE: restart events when the plan changes
        self.returning = None  # returnframe, while only it is watched (``return``: ``_watch_plan``)
        self.returned = None  # a returnframe that returned or unwound: its caller is watched again
        self.watch_code_a = self.watch_code_b = None  # the watched frames' code (at most two frames)
        self.plans: dict[int, tuple[Any, frozenset[int], str]] = {}  # identity(code) -> (code, lines, canonic file)
        self.conditions = ConditionCache()
        self.key: tuple | None = None
        self.problems: list[str] = []
        self.arm_seconds = 0.0  # time spent arming and releasing (reported by the benchmark)
        self._dynamo_init()

    # ---- arming ----------------------------------------------------------------------------------------
    def _acquire(self) -> None:
        self.tool = take_tool_id(TOOL_IDS, TOOL_NAME)
        if self.tool is None:
            raise RuntimeError("no free sys.monitoring tool id for llmpdb (ids %s are taken)" % (TOOL_IDS,))
        register = _MON.register_callback
        register(self.tool, _E.PY_START, self._on_start)
        register(self.tool, _E.PY_RESUME, self._on_start)
        register(self.tool, _E.LINE, self._on_line)
        register(self.tool, _E.JUMP, self._on_jump)
        register(self.tool, _E.PY_RETURN, self._on_return)
        register(self.tool, _E.STOP_ITERATION, self._on_exception)
        register(self.tool, _E.RAISE, self._on_exception)
        register(self.tool, _E.PY_UNWIND, self._on_unwind)

    def _set_local(self, code, events: int) -> None:
        entry = self.local.get(identity(code))
        if entry is not None and entry[0] is code and entry[1] == events:
            return
        _MON.set_local_events(self.tool, code, events)
        if events:
            self.local[identity(code)] = (code, events)
        else:
            self.local.pop(identity(code), None)

    def _wanted_local(self, code) -> int:
        events = _BP_EVENTS if self.lines_for(code) else 0
        if identity(code) in self.watched_codes:
            events |= _WATCH_EVENTS if identity(code) in self.line_codes else _RETURN_EVENTS
        return events

    def _watch_plan(self, mode: str) -> tuple:
        """(watched frames, stop frame, stop line) for ``mode``: for ``return``, ``returnframe`` alone until
        it ends (module doc); else ``stopframe`` and ``returnframe``."""
        pdb = self.pdb
        if mode != WATCH:
            self.returning = self.returned = None
            return (), None, 0
        stop_frame, return_frame = pdb.stopframe, pdb.returnframe
        if self.returned is not None and self.returned is not return_frame:
            self.returned = None
        if (return_frame is not None and stop_frame is not None and pdb.stoplineno == 0
                and return_frame is not self.returned and return_frame.f_back is stop_frame):
            self.returning = return_frame
            return (return_frame,), None, 0
        self.returning = None
        return pdb.fb_watched_frames(), stop_frame, pdb.stoplineno

    def activate(self, mode: str, frame) -> None:
        """Deliver the events of ``mode`` (CONTINUE or WATCH) from now on; ``frame`` is where pdb stopped."""
        pdb = self.pdb
        breaks = pdb.fb_breakpoint_lines()
        watched, stop_frame, stop_lineno = self._watch_plan(mode)
        key = (mode, tuple(identity(f) for f in watched), identity(stop_frame), stop_lineno)
        self.watch_seen = (pdb.stopframe, pdb.returnframe, pdb.stoplineno)
        if self.tool is not None and key == self.key and breaks == self.breaks:
            self.breaks = breaks  # the same snapshot object: ``resume_quickly`` compares identities
            return None
        restart = self.tool is None or breaks != self.breaks or self.watch_disabled
        self.watch_disabled = False
        if self.tool is None:
            self._acquire()
        changed = breaks != self.breaks
        if changed:
            self.code_lines.clear()
            self.plans.clear()
        self.breaks = breaks
        if changed and (self.dynamo_traced or "torch._dynamo" in sys.modules):
            self._dynamo_recheck()
        new_codes = {identity(f.f_code) for f in watched}
        line_codes = {identity(stop_frame.f_code)} if stop_frame is not None else set()
        restart = restart or bool(new_codes - self.watched_codes) or bool(line_codes - self.line_codes)
        self.watched, self.watched_codes, self.key = watched, new_codes, key
        codes = [f.f_code for f in watched]
        self.watch_code_a, self.watch_code_b = (codes + [None, None])[:2]  # (``_watched_code``)
        self.line_codes, self.stop_frame, self.stop_lineno = line_codes, stop_frame, stop_lineno
        self.thread = threading.get_ident()
        for code, _ in list(self.local.values()):
            self._set_local(code, self._wanted_local(code))
        walk = frame
        while walk is not None:  # frames already running: PY_START is behind them
            events = self._wanted_local(walk.f_code)
            if events:
                self._set_local(walk.f_code, events)
            walk = walk.f_back
        for watched_frame in watched:
            self._set_local(watched_frame.f_code, self._wanted_local(watched_frame.f_code))
        if mode != WATCH:
            _MON.set_events(self.tool, _GLOBAL_CONTINUE)
        else:
            _MON.set_events(self.tool, _GLOBAL_RETURNING if self.returning is not None else _GLOBAL_WATCH)
        if restart:
            _MON.restart_events()
        return None

    def resume_quickly(self, mode: str, frame) -> bool:
        return (self.tool is not None and (self.returning is None or self.returned is None)
                and EngineBase.resume_quickly(self, mode, frame))

    def refresh(self) -> None:
        """Breakpoints changed while running: re-arm with the debugged thread's current stack."""
        if self.key is not None:
            self.key = None
            frame = sys._getframe(1)
            self.activate(self.pdb.fast_breakpoints_mode(), frame)

    def release_cleared(self) -> None:
        """Breakpoints were cleared at a prompt: code objects that only they needed lose their local events
        now; the next ``activate`` plans (and restarts events) as usual. The code of the frame stopped on
        an instruction that returns keeps its events until then (``return 1`` is one ``RETURN_CONST`` on
        3.12+): the interpreter runs that instruction as it was instrumented when the LINE event came, so
        events taken off it now and put back for ``r`` or ``n`` would miss its return."""
        if self.tool is None:
            return
        breaks = self.pdb.fb_breakpoint_lines()
        if breaks == self.breaks:
            return
        returning = set()
        walk = sys._getframe(1)
        while walk is not None:
            code = walk.f_code
            if 0 <= walk.f_lasti < len(code.co_code) and code.co_code[walk.f_lasti] in _RETURN_OPCODES:
                returning.add(identity(code))
            walk = walk.f_back
        self.breaks = breaks
        self.code_lines.clear()
        self.plans.clear()
        self.key = None
        self.watch_disabled = True  # events to restart at the next plan, although ``breaks`` is current
        for code, _ in list(self.local.values()):
            if identity(code) not in returning:
                self._set_local(code, self._wanted_local(code))

    def deactivate(self) -> None:
        """Stop all events and free the tool id."""
        tool, self.tool = self.tool, None
        self.key = None
        self.watched, self.watched_codes = (), set()
        self.line_codes, self.stop_frame, self.watch_disabled = set(), None, False
        self.returning = self.returned = None
        self.watch_code_a = self.watch_code_b = None
        if tool is None:
            return
        try:
            _MON.set_events(tool, 0)
            for code, _ in self.local.values():
                _MON.set_local_events(tool, code, 0)
            for event in (_E.PY_START, _E.PY_RESUME, _E.LINE, _E.JUMP, _E.PY_RETURN, _E.STOP_ITERATION,
                          _E.RAISE, _E.PY_UNWIND):
                _MON.register_callback(tool, event, None)
        finally:
            self.local.clear()
            self.code_lines.clear()
            self.line_maps.clear()
            self.plans.clear()
            if _MON.get_tool(tool) == TOOL_NAME:
                _MON.free_tool_id(tool)

    # ---- callbacks ---------------------------------------------------------------------------------------
    def _watched_frame(self, frame):
        for watched in self.watched:
            if frame is watched:
                return True
        return False

    def _on_start(self, code, offset):
        if self.tool is not None:
            if is_translator_init(code):  # torch.compile traces a code object (``monitoring_dynamo``)
                self._dynamo_traces(sys._getframe(1))
                return None  # stays on: every translator dynamo builds is heard
            events = self._wanted_local(code)
            if events:
                self._set_local(code, events)
        return _DISABLE

    def _on_line(self, code, line, frame=None):
        """A LINE event (``frame`` is None: it comes from ``sys.monitoring``), or a JUMP that is one (the
        jumping frame). Run at every crossing of a breakpoint line, a false condition's included: the
        caches' hits are looked up here (one ``identity``, no call of ``lines_for``)."""
        if self.tool is None:
            return _DISABLE
        if self.state["depth"]:
            return None  # pdb is interacting (``debug`` runs code with events on again): as pdb, ignore
        if frame is None:
            frame = sys._getframe(1)
        key = identity(code)
        watching = key in self.line_codes
        if watching and frame is self.stop_frame and line >= self.stop_lineno:
            self.pdb.fb_deliver(frame, "line", None)  # pdb's stop_here: the stop frame at or past the line
            return None
        plan = self.plans.get(key)
        if plan is None or plan[0] is not code:  # once per code object while breakpoints stay
            plan = self.plans[key] = (code, self.lines_for(code), self.pdb.canonic(code.co_filename))
        lines = plan[1]
        if lines is ALL_LINES:
            if _get_ident() == self.thread:
                self.pdb.fb_deliver(frame, "line", None)
            return None
        if line in lines:
            # all_false: every condition false, pdb would only have counted the hits; else pdb decides
            if _get_ident() == self.thread and not self.conditions.all_false(plan[2], line, frame):
                self.pdb.fb_deliver(frame, "line", None)
            return None
        if watching:
            if line < self.stop_lineno:
                self.watch_disabled = True
                return _DISABLE  # never a stop while this plan holds: ``activate`` restarts events
            return None  # another frame running the stop frame's code
        return _DISABLE

    def _line_at(self, code, offset: int):
        entry = self.line_maps.get(identity(code))
        if entry is None or entry[0] is not code:
            mapping = {}
            for start, end, line in code.co_lines():
                for at in range(start, end, 2):
                    mapping[at] = line
            entry = (code, mapping)
            self.line_maps[identity(code)] = entry
        return entry[1].get(offset)

    def _on_jump(self, code, source, target):
        if self.tool is None or target > source:
            return _DISABLE  # forward jumps never make a line event
        line = self._line_at(code, target)
        if line is None or line != self._line_at(code, source):
            return _DISABLE  # a different line: the LINE event at the target reports it
        return self._on_line(code, line, sys._getframe(1))

    # RAISE and PY_UNWIND are global: every exception raised or passing through any frame while a
    # ``next`` or ``return`` runs (700 of each in a tiny Llama's ``generate()``) calls these. The code
    # object, compared by identity, turns away all but the watched frames' code before anything else.
    def _on_return(self, code, offset, value):
        if code is not self.watch_code_a and code is not self.watch_code_b:
            return None
        frame = sys._getframe(1)
        if self.tool is not None and not self.state["depth"] and self._watched_frame(frame):
            self._deliver_return(frame, value)
        return None

    def _on_unwind(self, code, offset, exc):
        if code is not self.watch_code_a and code is not self.watch_code_b:
            return None
        frame = sys._getframe(1)
        if self.tool is not None and not self.state["depth"] and self._watched_frame(frame):
            self._deliver_return(frame, None)
        return None

    def _deliver_return(self, frame, value) -> None:
        returning = frame is self.returning
        if returning:
            self.returned = frame  # from now on the caller's events matter (``_watch_plan``)
        self.pdb.fb_deliver(frame, "return", value)
        if returning and self.returning is frame and self.tool is not None and self.state["mode"] == WATCH:
            self.activate(WATCH, frame)  # pdb did not stop and waits as before: watch the caller now

    def _on_exception(self, code, offset, exc):
        if code is not self.watch_code_a and code is not self.watch_code_b:
            return None
        frame = sys._getframe(1)
        if self.tool is not None and not self.state["depth"] and self._watched_frame(frame):
            self.pdb.fb_deliver(frame, "exception", (type(exc), exc, exc.__traceback__))
        return None


register_delivery(MonitoringEngine._on_start, MonitoringEngine._on_line, MonitoringEngine._on_jump,
                  MonitoringEngine._on_return, MonitoringEngine._on_unwind, MonitoringEngine._on_exception)
