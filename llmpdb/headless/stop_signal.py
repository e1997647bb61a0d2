"""``kill -USR1 PID``: stop the program at its next line (``python -m llmpdb`` installs it).

Usage::

    install_attach_signal()   # only where SIGUSR1 has its default action: a program's own handler stays

The stop then goes where any stop goes (without a terminal: the headless policy; ``attach`` waits its
full timeout again). At a stop already (its prompt, an attach wait, a command running: a thread holds
``debugger.thread_gate.STOP_GATE``) the signal is ignored with one line: a second stop on top of an open
one would break it (``'NoneType' object has no attribute 'f_globals'``), and llmpdb's own code (the wait's
``accept_one``, a trace hook) is never where the program stops: the program's frame under it is.
"""

from __future__ import annotations

import signal

__all__ = ["install_attach_signal"]


def install_attach_signal() -> None:
    """Usage: ``install_attach_signal()`` (``python -m llmpdb`` does it); ``kill -USR1 PID`` then stops the
    program at its next line, where the policy applies (``attach`` waits its full timeout again)."""
    sigusr1 = getattr(signal, "SIGUSR1", None)
    if sigusr1 is not None and signal.getsignal(sigusr1) == signal.SIG_DFL:
        signal.signal(sigusr1, _stop_on_signal)


def _stop_on_signal(signum, frame) -> None:
    from ..breakpoints.stop_gate import STOP_GATE
    from ..session import SESSION
    from .policy import _STATE, _log
    from .stop_lines import in_debugger_code, stop_where

    owner = STOP_GATE.owner
    if owner is not None and owner.is_alive():
        _log(f"llmpdb: SIGUSR1: already stopped (thread {owner.name!r}); ignored")
        return
    while frame is not None and in_debugger_code(frame):  # in a trace hook: the program's frame under it
        frame = frame.f_back
    _STATE.gave_up = False
    if SESSION.stopper is not None and frame is not None:
        _log(f"llmpdb: SIGUSR1: stopping at {stop_where(frame)}")
        SESSION.stopper(frame, None)
