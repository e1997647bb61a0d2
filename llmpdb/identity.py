"""Who this process is in a distributed job: its rank, the world size, the rank that prompts.

Usage::

    from llmpdb.identity import current_rank, world_size, rank_suffix
    current_rank()   # 1 under torchrun's second worker, None in a plain process
    rank_suffix()    # " r1" (for prompts and log lines), "" outside a job

A leaf every family may import (remote names its socket after the rank, headless and crash reports say it,
the console shows it): the default process group once torch has initialised one (``sys.modules``: torch
is never imported here), else the launcher's environment, tried in the order of ``LAUNCHERS``: torchrun
(and ``accelerate launch``, ``deepspeed``, which set the same variables), a SLURM job step (``srun``: the
step's task count, so a batch script run without ``srun`` is one process), Open MPI, then PMI (MPICH,
Intel MPI). Values are read as decimal digits only; anything else reads as unset.
"""

from __future__ import annotations

import os
import sys

__all__ = ["current_rank", "world_size", "local_rank", "launcher", "interactive_rank", "rank_suffix",
           "initialised_dist", "env_int", "LAUNCHERS"]

# (launcher, rank, world size, local rank): the first whose rank and world size are both set and agree wins.
LAUNCHERS: tuple[tuple[str, str, str, str], ...] = (
    ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"),                    # also accelerate launch, deepspeed
    ("srun", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID"),     # a job step, not the batch script
    ("mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),  # Open MPI
    ("mpirun", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),               # MPICH, Intel MPI (PMI)
)
_MOST_RANKS = 1 << 24  # no job is larger: a bigger value is a typo or hostile, not a rank


def initialised_dist():
    """Usage: ``initialised_dist()`` -> ``torch.distributed`` once the default group exists, else None."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return dist
    except (RuntimeError, ValueError, AttributeError):  # a half-initialised group: the environment stands
        pass
    return None


def env_int(name: str) -> int | None:
    """Usage: ``env_int("RANK")`` -> a whole number 0..2**24 written in decimal digits, else None
    (``inf``, ``-1``, ``1e3``, ``" 2"``, a 5000-digit value: None)."""
    value = os.environ.get(name, "")
    if not value.isascii() or not value.isdigit() or len(value) > 9:
        return None
    number = int(value)
    return number if number <= _MOST_RANKS else None


def launcher() -> tuple[str, int, int, int | None] | None:
    """Usage: ``launcher()`` -> ``("srun", rank, world, local_rank)`` from the launcher's environment, or None
    outside a job of 2+ processes (a ``world`` of 1, a rank not below the world, unset or unreadable values)."""
    for name, rank_var, world_var, local_var in LAUNCHERS:
        rank, world = env_int(rank_var), env_int(world_var)
        if rank is None or world is None:
            continue
        if world < 1 or rank >= world:
            return None  # the variables disagree: not a job llmpdb can coordinate
        return name, rank, world, env_int(local_var)
    return None


def current_rank() -> int | None:
    """Usage: ``current_rank()`` -> this process's global rank, or None outside a distributed job."""
    dist = initialised_dist()
    if dist is not None:
        return int(dist.get_rank())
    found = launcher()
    return found[1] if found is not None else None


def world_size() -> int | None:
    """Usage: ``world_size()`` -> the number of ranks, or None outside a distributed job."""
    dist = initialised_dist()
    if dist is not None:
        return int(dist.get_world_size())
    found = launcher()
    return found[2] if found is not None else None


def local_rank() -> int | None:
    """Usage: ``local_rank()`` -> the rank on this node (``LOCAL_RANK``, ``SLURM_LOCALID``...), or None."""
    found = launcher()
    return found[3] if found is not None else None


def interactive_rank() -> int:
    """Usage: ``interactive_rank()`` -> ``LLMPDB_RANK`` (default 0): the rank that prompts."""
    return env_int("LLMPDB_RANK") or 0


def rank_suffix() -> str:
    """Usage: ``rank_suffix()`` -> ``" r1"`` under a distributed launcher, else ``""``."""
    rank = current_rank()
    return f" r{rank}" if rank is not None else ""
