"""Ranks of a distributed job: which rank this process is, for the prompt and the stop headers.

Usage: ``rank_suffix()`` -> ``" r1"`` under a distributed launcher (``RANK`` set, or an initialised default
process group), else ``""``. Never imports torch: the process group is read only when the debuggee loaded
``torch.distributed``.
"""

from __future__ import annotations

import os
import sys

__all__ = ["current_rank", "rank_suffix"]


def current_rank() -> int | None:
    """Usage: ``current_rank()`` -> this process's global rank, or None outside a distributed job."""
    rank = os.environ.get("RANK")
    dist = sys.modules.get("torch.distributed")
    if dist is not None:
        try:
            if dist.is_available() and dist.is_initialized():
                return int(dist.get_rank())
        except (RuntimeError, ValueError, AttributeError):  # a half-initialised group: the env RANK stands
            pass
    return int(rank) if rank not in (None, "") and rank.lstrip("-").isdigit() else None


def rank_suffix() -> str:
    """Usage: ``rank_suffix()`` -> ``" r1"`` under a distributed launcher, else ``""``."""
    rank = current_rank()
    return f" r{rank}" if rank is not None else ""
