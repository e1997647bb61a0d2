"""Whether a standard input that is not a terminal will ever give the debugger a command.

Usage (``llmpdb.headless.policy`` asks it before a stop reads a non-terminal stdin)::

    if stdin_stays_silent(sys.stdin, timeout=120.0, log=print_to_stderr):
        ...   # nothing came: the stop goes to the headless policy instead of blocking in readline()

An open pipe that nobody writes to (``ssh host 'python job.py'`` without ``-t``, ``docker run -i``,
``Popen(stdin=PIPE)`` never written) would block every ``breakpoint()`` forever. The first stop that reads
such a stdin waits at most ``timeout`` seconds (the attach timeout) for something to read (a line, or the
end of the input); when nothing comes it says so in one line and every later stop checks without waiting.
Once the descriptor has had something to read, it is read as before, at every stop: a pipe that delivers
commands (``printf 'p x\\nc\\n' | python -m llmpdb job.py``) works exactly as without this check. A terminal,
a stream without a descriptor (a test's, a client's) or one ``select`` cannot watch is read as before.
"""

from __future__ import annotations

import io
import select
import time
from typing import Callable

__all__ = ["stdin_stays_silent", "forget"]

_MAX_SELECT = 3600.0  # one select() at most this long (an infinite timeout is a loop of them)
_STATE = {"spoke": False, "silent": False}


def forget() -> None:
    """Usage: ``forget()`` (tests, a forked child); as if no stop had looked at stdin yet."""
    _STATE.update(spoke=False, silent=False)


def _readable(fd: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        if select.select([fd], [], [], max(0.0, min(left, _MAX_SELECT)))[0]:
            return True
        if left <= _MAX_SELECT:
            return False


def stdin_stays_silent(stream, timeout: float, log: Callable[[str], None]) -> bool:
    """Usage: ``stdin_stays_silent(sys.stdin, 120.0, log)``; True when nothing came within the wait (above)."""
    if _STATE["spoke"]:
        return False
    try:
        if stream.isatty():
            return False
        fd = stream.fileno()
        if _readable(fd, 0.0):
            _STATE["spoke"] = True
            return False
        if _STATE["silent"]:
            return True
        log(f"llmpdb: standard input is not a terminal and has nothing to read; waiting up to {timeout:g} s "
            "for commands")
        if _readable(fd, timeout):
            _STATE["spoke"] = True
            return False
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):  # no descriptor select can watch
        return False
    _STATE["silent"] = True
    log(f"llmpdb: nothing came on standard input within {timeout:g} s; this stop and later ones go to the "
        "headless policy (LLMPDB_HEADLESS) without waiting for it")
    return True
