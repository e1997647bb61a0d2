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

from ..breakpoints.stop_gate import STOP_GATE, StopGate, Wait  # noqa: F401 (StopGate, Wait: their old home)

__all__ = ["StopGate", "STOP_GATE", "ThreadGateMixin", "Wait"]

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
