"""Ctrl-Z at the console: the job stops before the prompt is drawn again, and ``fg`` brings the prompt back.

Usage::

    run_in_terminal(stop_job)      # in the editor's Ctrl-Z binding (``console.prompt``); returns after ``fg``

A terminal in line mode sends SIGTSTP to its foreground process group; the editor reads keys raw, so it
sends the signal itself. prompt_toolkit's own binding sends it to the group (``kill(0, SIGTSTP)``) from the
editor's thread, and the signal, directed at the process, may be taken by another thread (the main thread,
waiting for the line): the editor's thread went on and drew the prompt again before the process stopped,
and after ``fg`` nothing was drawn (the user saw no prompt). Here the other processes of the group (a
producer piped into the program, data-loader workers) are sent SIGTSTP one by one, then this thread sends
it to itself: a signal directed at the calling thread is taken before the call returns, so this function
returns only once the process has stopped and been continued. Where a process group is orphaned (a
launcher without job control) the kernel drops the signal and nothing happens, as with a terminal's
Ctrl-Z. Where processes cannot be listed (no ``/proc``), or the program has a SIGTSTP handler of its own,
the group is signalled as a terminal does; where the program ignores SIGTSTP, nothing is stopped (the
helpers would stay stopped while the debugger went on).
"""

from __future__ import annotations

import os
import signal
import threading

__all__ = ["stop_job", "can_stop_job"]


def can_stop_job() -> bool:
    """Usage: ``can_stop_job()``; whether this platform has job control (SIGTSTP)."""
    return hasattr(signal, "SIGTSTP") and hasattr(signal, "pthread_kill")


def _others_in_group(group: int, me: int) -> list[int] | None:
    """The other processes of process group ``group``, or None where they cannot be listed."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    others = []
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            if os.getpgid(int(name)) == group:
                others.append(int(name))
        except OSError:  # gone since the listing, or not ours to ask about
            continue
    return others


def stop_job() -> None:
    """Usage: ``stop_job()``; stop this process's job as a terminal's Ctrl-Z would, returning after ``fg``."""
    if not can_stop_job():
        return
    handler = signal.getsignal(signal.SIGTSTP)
    if handler == signal.SIG_IGN:  # the program (or its launcher) ignores the stop: stop nothing of the job
        return
    if handler not in (signal.SIG_DFL, None):  # the program's own handler decides, as at a terminal's Ctrl-Z
        os.kill(0, signal.SIGTSTP)
        return
    me = os.getpid()
    try:
        group = os.getpgrp()
    except OSError:
        group = None
    others = _others_in_group(group, me) if group is not None else None
    if others is None:  # no process list: the group as a whole (this thread may run on a moment)
        os.kill(0, signal.SIGTSTP)
        return
    for pid in others:
        try:
            os.kill(pid, signal.SIGTSTP)
        except OSError:  # gone, or not ours to signal
            pass
    signal.pthread_kill(threading.get_ident(), signal.SIGTSTP)
