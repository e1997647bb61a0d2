"""The stop gate: one stop at a time across threads (the object; ``debugger/thread_gate.py`` is its stage).

Usage::

    STOP_GATE.reserve(announce)     # set_trace (hooks.py): this thread's next stop is the next one shown
    wait = STOP_GATE.enter(announce); ...; STOP_GATE.leave()   # around a stop
    STOP_GATE.owner                 # the thread whose stop is open, or None (a signal arriving at a stop)

A leaf like the catch and mute registries beside it: ``hooks.py`` takes the gate before any stop and
``headless/stop_signal.py`` asks whether a stop is open, neither importing the debugger.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

__all__ = ["StopGate", "STOP_GATE", "Wait"]

_ANNOUNCE_AFTER_S = 0.3  # let the stopped thread print its header first (lines would interleave)
Announce = Callable[[str, str], None]


class Wait:
    """How a thread got its turn: whom it waited for, how long, and whether it already said so."""

    __slots__ = ("other", "seconds", "announced")

    def __init__(self, other: str, seconds: float, announced: bool):
        self.other, self.seconds, self.announced = other, seconds, announced


class StopGate:
    """A re-entrant turn for stops, owned by a thread; ``reserve`` takes it without entering a stop."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._owner: threading.Thread | None = None
        self._depth = 0
        self._wait: Wait | None = None  # how the owner got its turn, told once at its stop

    @property
    def owner(self) -> threading.Thread | None:
        return self._owner

    def _take_turn(self, announce: Announce | None) -> None:
        me = threading.current_thread()
        if self._owner is me:
            return
        wait = None
        while self._owner is not None:
            if not self._owner.is_alive():  # the thread ended holding its turn (a stop never shown)
                break
            now = time.monotonic()
            if wait is None:
                wait, started = Wait(self._owner.name, 0.0, False), now
            wait.seconds = now - started
            if not wait.announced and wait.seconds >= _ANNOUNCE_AFTER_S and announce is not None:
                wait.announced = True
                announce(me.name, wait.other)
            self._cond.wait(0.1)
        self._owner, self._depth, self._wait = me, 0, wait

    def reserve(self, announce: Announce | None = None) -> None:
        """Usage: ``STOP_GATE.reserve(announce)`` before ``set_trace``; the stop it leads to enters it."""
        with self._cond:
            self._take_turn(announce)

    def enter(self, announce: Announce | None = None) -> Wait | None:
        """Usage: ``wait = STOP_GATE.enter(announce)`` at the start of a stop, then ``leave()``; returns how
        this thread got its turn (once, at its outermost stop), or None when it did not wait."""
        with self._cond:
            self._take_turn(announce)
            self._depth += 1
            wait, self._wait = self._wait, None
            return wait

    def leave(self) -> None:
        """Usage: ``STOP_GATE.leave()`` at the end of a stop; the outermost one frees the gate."""
        with self._cond:
            if self._owner is not threading.current_thread():
                return
            self._depth -= 1
            if self._depth <= 0:
                self._owner, self._depth = None, 0
                self._cond.notify_all()


STOP_GATE = StopGate()
