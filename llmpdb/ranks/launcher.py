"""Telling the launcher that the job ends: ``q`` under ``torchrun --max-restarts N`` must not restart the job.

Usage::

    stop_restarts(job)   # before this rank exits on `q`: at most one rank per launcher asks it to stop

torchrun's elastic agent restarts every worker when one fails and restarts remain
(``TORCHELASTIC_MAX_RESTARTS`` above ``TORCHELASTIC_RESTART_COUNT``), so ``q`` (every rank exits with status 3)
used to start the job again, three times for ``--max-restarts 2``. The agent has no request for "stop now";
it does stop, without a restart, when it gets SIGTERM: it sends the workers SIGTERM and exits (torchrun
prints its own ``SignalException`` traceback). So the first rank of each launcher that ends on ``q``
sends its parent SIGTERM, after checking that the parent is that launcher (its command line names
torchrun's module, ``torchrun``, ``accelerate`` or ``deepspeed``) and through a store key that one rank
per launcher takes, so the agent is never signalled twice while it shuts down.
"""

from __future__ import annotations

import os
import signal
import socket

from ..identity import env_int

__all__ = ["restarts_left", "stop_restarts", "launcher_pid"]

_LAUNCHERS = (b"torch.distributed.run", b"torchrun", b"torch/distributed/run.py", b"accelerate", b"deepspeed")


def restarts_left() -> int:
    """Usage: ``restarts_left()`` -> how many more times the elastic agent would restart the job (0 outside)."""
    most, done = env_int("TORCHELASTIC_MAX_RESTARTS"), env_int("TORCHELASTIC_RESTART_COUNT") or 0
    return max(0, most - done) if most is not None else 0


def launcher_pid() -> int | None:
    """Usage: ``launcher_pid()`` -> the parent's pid when the parent is torchrun's agent, else None."""
    parent = os.getppid()
    if parent <= 1:
        return None  # the launcher is gone: this worker is an orphan
    try:
        with open(f"/proc/{parent}/cmdline", "rb") as handle:
            command = handle.read(4096)
    except OSError:
        return None
    return parent if any(name in command for name in _LAUNCHERS) else None


def stop_restarts(job, say) -> bool:
    """Ask this rank's launcher to end the job without a restart, after ``say(line)`` (the launcher's SIGTERM
    to its workers may end this one at once). Returns whether it asked."""
    left = restarts_left()
    if left <= 0:
        return False
    parent = launcher_pid()
    if parent is None:
        return False
    key = f"launcher-stopped/{socket.gethostname()}/{parent}"
    try:
        if job.store.compare_set(key, "", str(job.rank)) != str(job.rank).encode():
            return False  # another rank of this launcher asked already
    except Exception:  # the store is gone: the job is ending anyway
        return False
    say(f"llmpdb r{job.rank}: asking torchrun (pid {parent}) to end the job instead of restarting it "
        f"({left} restart(s) were left)")
    try:
        os.kill(parent, signal.SIGTERM)
    except OSError:  # the launcher is gone: nothing left to restart the job
        return False
    return True
