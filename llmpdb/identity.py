"""Who this process is in a distributed job: its rank, the world size, the rank that prompts.

Usage::

    from llmpdb.identity import current_rank, world_size, rank_suffix
    current_rank()   # 1 under torchrun's second worker, None in a plain process
    rank_suffix()    # " r1" (for prompts and log lines), "" outside a job

A leaf every family may import (remote names its socket after the rank, headless and crash reports say it,
the console shows it): it reads the launcher's environment, or the default process group once torch has
initialised one (``sys.modules``: torch is never imported here).
"""

from __future__ import annotations

import os
import sys

__all__ = ["current_rank", "world_size", "interactive_rank", "rank_suffix", "initialised_dist", "env_int"]


def initialised_dist():
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return dist
    except (RuntimeError, ValueError, AttributeError):  # a half-initialised group: the environment stands
        pass
    return None


def env_int(name: str) -> int | None:
    value = os.environ.get(name, "")
    return int(value) if value.lstrip("-").isdigit() else None


def current_rank() -> int | None:
    """Usage: ``current_rank()`` -> this process's global rank, or None outside a distributed job."""
    dist = initialised_dist()
    return int(dist.get_rank()) if dist is not None else env_int("RANK")


def world_size() -> int | None:
    """Usage: ``world_size()`` -> the number of ranks, or None outside a distributed job."""
    dist = initialised_dist()
    return int(dist.get_world_size()) if dist is not None else env_int("WORLD_SIZE")


def interactive_rank() -> int:
    """Usage: ``interactive_rank()`` -> ``LLMPDB_RANK`` (default 0): the rank that prompts."""
    return env_int("LLMPDB_RANK") or 0


def rank_suffix() -> str:
    """Usage: ``rank_suffix()`` -> ``" r1"`` under a distributed launcher, else ``""``."""
    rank = current_rank()
    return f" r{rank}" if rank is not None else ""
