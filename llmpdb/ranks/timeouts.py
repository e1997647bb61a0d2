"""How long the job's collectives may wait: the default process group's timeout, and the step watchdog's grace.

Usage::

    group_timeout_seconds()   # 5.0 under init_process_group(timeout=timedelta(seconds=5)); None when unknown
    step_grace_seconds()      # LLMPDB_STEP_GRACE (default 1 s), at most a fifth of the group's timeout
    timeout_phrase()          # "5 s" or "the process group's timeout" (for one-line messages)

The group's timeout is read only when the debuggee already loaded and initialised ``torch.distributed``
(never imported here), through torch's private backend options (``ProcessGroup._get_backend(device).options
._timeout``, torch 2.x): any failure there means "unknown", never an error. A step (``n``/``s``/``until``)
that runs into a collective needs the waiting ranks there before that timeout fires; the watchdog
(``ranks/wait.py`` ``StepWatchdog``) releases them after ``step_grace_seconds()``, which is independent of
``LLMPDB_RANK_GRACE`` (how long a lone rank waits before it prompts).
"""

from __future__ import annotations

import math
import os
import sys

__all__ = ["group_timeout_seconds", "step_grace_seconds", "timeout_phrase"]

_STEP_GRACE = 1.0  # seconds: a step that has not stopped again by then is probably in a collective


def group_timeout_seconds() -> float | None:
    """Usage: ``group_timeout_seconds()``; the default group's smallest backend timeout in seconds, or None."""
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return None
    try:
        if not (dist.is_available() and dist.is_initialized()):
            return None
        group = dist.distributed_c10d._get_default_group()
        import torch

        found = []
        for device in list(getattr(group, "_device_types", []) or [])[:8]:
            options = getattr(group._get_backend(torch.device(device)), "options", None)
            timeout = getattr(options, "_timeout", None)
            seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else None
            if isinstance(seconds, float) and math.isfinite(seconds) and seconds > 0:
                found.append(seconds)
        return min(found) if found else None
    except Exception:  # private API: another torch may differ; unknown is an answer
        return None


def step_grace_seconds(group_timeout: float | None = None) -> float:
    """Usage: ``step_grace_seconds()``; ``LLMPDB_STEP_GRACE`` (default 1, 0.05 to 3600) capped at a fifth of
    the group's timeout, so that released ranks reach a pending collective well before it times out."""
    try:
        grace = float(os.environ.get("LLMPDB_STEP_GRACE", _STEP_GRACE))
    except ValueError:
        grace = _STEP_GRACE
    grace = min(3600.0, max(0.05, grace)) if math.isfinite(grace) else _STEP_GRACE
    timeout = group_timeout_seconds() if group_timeout is None else group_timeout
    if timeout is not None:
        grace = min(grace, max(0.05, timeout / 5))
    return grace


def timeout_phrase() -> str:
    """Usage: ``timeout_phrase()`` -> ``"5 s"``, else ``"the process group's timeout"``."""
    timeout = group_timeout_seconds()
    return f"{timeout:g} s" if timeout is not None else "the process group's timeout"
