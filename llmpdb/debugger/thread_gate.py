"""One stop at a time across threads: a thread that reaches a stop while another is stopped waits, and says so.

Usage::

    STOP_GATE.reserve(announce)     # set_trace: this thread's next stop is the next one shown
    class Pdb(ThreadGateMixin, ...): ...   # a stop waits for its turn, gives it back at the end

The process has one debugger (``hooks.get_debugger``), and pdb keeps the stop's state (``curframe``,
``stack``, ``stopframe``) on it: two threads stopping at once overwrite each other's state (the second
thread's commands fail with ``'NoneType' object has no attribute 'f_globals'``) and their headers
interleave. The gate belongs to one thread from its ``set_trace`` (or breakpoint line) to the end of that
stop; a recursive stop in the same thread (``debug``) enters again. Another thread blocks at the gate and
prints one line naming both threads. A gate held by a thread that has ended is taken back.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable

__all__ = ["StopGate", "STOP_GATE", "ThreadGateMixin", "Wait"]

_ANNOUNCE_AFTER_S = 0.3  # let the stopped thread print its header first (lines would interleave)
Announce = Callable[[str, str], None]


@dataclass
class Wait:
    """How a thread got its turn: whom it waited for, how long, and whether it already said so."""

    other: str
    seconds: float
    announced: bool


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


class ThreadGateMixin:
    """``interaction`` runs one thread at a time; a thread that waited says so in one line."""

    def announce_wait(self, waiting: str, stopped: str) -> None:
        self.message(f"llmpdb: thread {waiting!r} waits: thread {stopped!r} is stopped")

    def stop_thread_gate(self, stop, proceed):
        """Stop stage ``thread gate``: wait for this thread's turn; give the gate back after the stop."""
        wait = STOP_GATE.enter(self.announce_wait)
        try:
            if wait is not None:
                me = threading.current_thread().name
                self.message(f"llmpdb: thread {me!r} stops (waited {wait.seconds:.1f} s)" if wait.announced
                             else f"llmpdb: thread {me!r} waited while thread {wait.other!r} was stopped")
            return proceed()
        finally:
            STOP_GATE.leave()
