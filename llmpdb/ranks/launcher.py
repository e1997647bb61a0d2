"""Telling the launcher that the job ends: ``q`` under ``torchrun --max-restarts N`` must not restart the job.

Usage::

    stop_restarts(job, say)   # before this rank exits on `q`: at most one rank per launcher asks it to stop

torchrun's elastic agent restarts every worker when one fails and restarts remain
(``TORCHELASTIC_MAX_RESTARTS`` above ``TORCHELASTIC_RESTART_COUNT``), so ``q`` (every rank exits with status 3)
used to start the job again, three times for ``--max-restarts 2``. The agent has no request for "stop now";
it does stop, without a restart, when it gets SIGTERM: it sends the workers SIGTERM and exits (torchrun
prints its own ``SignalException`` traceback). So the first rank of each launcher that ends on ``q``
sends its parent SIGTERM, after checking that the parent is that launcher (its command line names
torchrun's module, ``torchrun``, ``accelerate`` or ``deepspeed``) and through a store key that one rank
per launcher takes, so the agent is never signalled twice while it shuts down. ``accelerate launch`` runs
the same agent inside its own process (``--max_restarts N``); the line said before the signal names the
launcher the parent runs (``launcher_name``).
"""

from __future__ import annotations

import os
import signal
import socket

from ..identity import env_int

__all__ = ["restarts_left", "stop_restarts", "launcher_pid", "launcher_name"]

_LAUNCHERS = (b"torch.distributed.run", b"torchrun", b"torch/distributed/run.py", b"accelerate", b"deepspeed")
_NAMES = ((b"torchrun", "torchrun"), (b"torch.distributed.run", "torchrun"), (b"torch/distributed/run", "torchrun"),
          (b"accelerate", "accelerate launch"), (b"deepspeed", "deepspeed"))


def restarts_left() -> int:
    """Usage: ``restarts_left()`` -> how many more times the elastic agent would restart the job (0 outside)."""
    most, done = env_int("TORCHELASTIC_MAX_RESTARTS"), env_int("TORCHELASTIC_RESTART_COUNT") or 0
    return max(0, most - done) if most is not None else 0


def _parent_launcher() -> tuple[int, str] | None:
    """(pid, name) of the parent when it runs torchrun's agent (``accelerate launch`` runs it in-process)."""
    parent = os.getppid()
    if parent <= 1:
        return None  # the launcher is gone: this worker is an orphan
    try:
        with open(f"/proc/{parent}/cmdline", "rb") as handle:
            command = handle.read(4096)
    except OSError:
        return None
    if not any(name in command for name in _LAUNCHERS):
        return None
    return parent, launcher_name(command)


def launcher_name(command: bytes) -> str:
    """Usage: ``launcher_name(open("/proc/PID/cmdline", "rb").read())`` -> ``"accelerate launch"``,
    ``"deepspeed"`` or ``"torchrun"`` (also when none is named): read from the first three words only, the
    program and its module, so a script named ``train_accelerate.py`` under torchrun is torchrun's."""
    head = b" ".join(command.split(b"\0")[:3])
    return next((name for word, name in _NAMES if word in head), "torchrun")


def launcher_pid() -> int | None:
    """Usage: ``launcher_pid()`` -> the parent's pid when the parent is torchrun's agent, else None."""
    found = _parent_launcher()
    return found[0] if found is not None else None


def stop_restarts(job, say) -> bool:
    """Ask this rank's launcher to end the job without a restart, after ``say(line)`` (the launcher's SIGTERM
    to its workers may end this one at once). Returns whether it asked."""
    left = restarts_left()
    if left <= 0:
        return False
    found = _parent_launcher()
    if found is None:
        return False
    parent, name = found
    key = f"launcher-stopped/{socket.gethostname()}/{parent}"
    try:
        if job.store.compare_set(key, "", str(job.rank)) != str(job.rank).encode():
            return False  # another rank of this launcher asked already
    except Exception:  # the store is gone: the job is ending anyway
        return False
    say(f"llmpdb r{job.rank}: asking {name} (pid {parent}) to end the job instead of restarting it "
        f"({left} restart(s) were left)")
    try:
        os.kill(parent, signal.SIGTERM)
    except OSError:  # the launcher is gone: nothing left to restart the job
        return False
    return True
