"""A process's state letter from ``/proc`` (Linux), waiting for the one a test expects.

Usage::

    assert process_state(pid, "T") == "T"     # stopped within 5 s (a signalled process stops when it runs)
    process_state(pid)                        # the state now: R, S, T, Z...
"""

from __future__ import annotations

import time


def process_state(pid: int, wanted: str = "", bound: float = 5.0) -> str:
    """The state letter of ``pid``; with ``wanted``, the first time it is that within ``bound`` seconds,
    else the last seen."""
    deadline = time.monotonic() + bound
    while True:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
        if not wanted or state == wanted or time.monotonic() > deadline:
            return state
        time.sleep(0.01)
