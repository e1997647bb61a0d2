"""Stop at the entry of one module's ``forward`` on Python 3.12+: a ``PY_START`` event on that code only.

Usage::

    waiter = one_shot(module, code, on_arrive, caller=hook_caller(sys._getframe(1)), on_error=report)
    waiter.install()          # OneShotMonitor where sys.monitoring has a free tool id, else OneShotTrace

``OneShotTrace`` turns on a global trace function until the forward starts; on 3.12 and 3.13 that
instruments every code object run meanwhile and costs a tiny Llama ``generate()`` with a breakpoint
condition that is never true about 20% (``bench/module_breakpoints_bench.py``). ``OneShotMonitor``
enables one local event, ``PY_START`` of the forward's code, on a ``sys.monitoring`` tool id of its own
(named ``"llmpdb"``): other code is never instrumented, and a trace function or a monitoring tool
already in use sees nothing of it. The tool id, and the event on each forward's code once waited for, stay
until ``forget_waits`` (the module breakpoints are cleared or the program restarts): a breakpoint whose
condition is false is waited for at every call of its module, and turning the event on and off each time
re-instrumented the forward's code and, with the tool id given back, every code object run after it:
5-9 us of the 65-75 us an armed call of a tiny Llama's attention costs (``bench/module_breakpoints_bench.py``,
interleaved A/B runs on 3.12 and 3.13). Between waits the event still fires at each start of that code (other
instances of the class too) and is turned away by one dictionary lookup.

At the event, the starting frame must run for ``module`` (``self``), and ``caller`` (torch's
``_call_impl``, which ran the pre-hook) must be among its first callers: a forward of another instance
of the class, or one called without ``module(...)``, keeps waiting. Then the wait ends and
``on_arrive(frame)`` runs, its errors handed to ``on_error``. A wait that never arrives (a later
pre-hook raised) is replaced by the module's next call, or ended by ``forget_waits``.
"""

from __future__ import annotations

import sys

from ..breakpoints.tool_ids import take_tool_id
from ..inspect.modules import frame_self
from .one_shot import OneShotTrace, arrive

__all__ = ["OneShotMonitor", "one_shot", "forget_waits"]

_MON = getattr(sys, "monitoring", None)
TOOL_NAME = "llmpdb"
_TOOL_IDS = (3, 4, _MON.DEBUGGER_ID) if _MON is not None else ()
_CALLERS = 8  # frames looked up from the forward for torch's module call (decorator wrappers between)


class _Waits:
    """The forwards waited for, by code: ``id(code) -> OneShotMonitor``; the tool id while any waits."""

    def __init__(self):
        self.by_code: dict[int, OneShotMonitor] = {}
        self.enabled: dict[int, object] = {}  # id(code) -> code whose PY_START is on (until ``forget``)
        self.tool: int | None = None

    def acquire(self) -> bool:
        if self.tool is not None:
            return True
        tool = take_tool_id(_TOOL_IDS, TOOL_NAME)
        if tool is None:
            return False
        _MON.register_callback(tool, _MON.events.PY_START, self.on_start)
        self.tool = tool
        return True

    def enable(self, code) -> None:
        if self.enabled.get(id(code)) is not code:
            _MON.set_local_events(self.tool, code, _MON.events.PY_START)
            self.enabled[id(code)] = code

    def forget(self) -> None:
        """Every wait ends, every event goes off, the tool id is given back."""
        self.by_code.clear()
        enabled, self.enabled = self.enabled, {}
        tool, self.tool = self.tool, None
        if tool is None:
            return
        for code in enabled.values():
            _MON.set_local_events(tool, code, 0)
        _MON.register_callback(tool, _MON.events.PY_START, None)
        _MON.free_tool_id(tool)

    def drop(self, waiter: OneShotMonitor) -> None:
        """The wait ended; its code's event stays on for the next wait (``forget`` turns it off)."""
        if self.by_code.get(id(waiter.code)) is waiter:
            del self.by_code[id(waiter.code)]

    def on_start(self, code, offset):
        waiter = self.by_code.get(id(code))
        if waiter is None or waiter.code is not code:
            return None  # the code of a wait already ended (or of a recycled id): nothing to do
        frame = sys._getframe(1)
        if not waiter.arrived(frame):
            return None  # another instance's forward, or one not called through this module call
        self.drop(waiter)
        arrive(waiter.on_arrive, waiter.on_error, frame)
        return None


_WAITS = _Waits()


class OneShotMonitor:
    """Waits for ``module``'s forward (``code``) to start, through a local ``PY_START`` event."""

    def __init__(self, module, code, on_arrive, caller, on_error=None):
        self.module_id = id(module)
        self.code, self.on_arrive, self.on_error = code, on_arrive, on_error
        self.caller = caller  # held until the wait ends: an id could be reused once that call returned

    def install(self) -> None:
        _WAITS.by_code[id(self.code)] = self  # one wait per code: a newer call of the module replaces it
        _WAITS.enable(self.code)

    def arrived(self, frame) -> bool:
        if id(frame_self(frame)) != self.module_id:
            return False
        if self.caller is None:
            return True
        walk = frame.f_back
        for _ in range(_CALLERS):
            if walk is None:
                return False
            if walk is self.caller:
                return True
            walk = walk.f_back
        return False


def forget_waits() -> None:
    """Usage: ``forget_waits()`` when the module breakpoints are cleared or the program restarts: every wait
    ends, every event goes off, the tool id is given back."""
    _WAITS.forget()


def one_shot(module, code, on_arrive, caller, on_error=None):
    """A ``OneShotMonitor`` where it can be used (3.12+, a Python forward, a free tool id), else a
    ``OneShotTrace``; either way ``.install()`` it."""
    if _MON is not None and code is not None and _WAITS.acquire():
        return OneShotMonitor(module, code, on_arrive, caller, on_error)
    return OneShotTrace(module, code, on_arrive, caller, on_error)
