"""What the ranks of a job tell each other through the c10d store: records, the terminal lock, policy, quit.

Usage::

    store, via = connect_store()          # the torchrun agent's store, else the default process group's
    job = RankJob(store, rank=1, world=2, interactive=0, via=via)
    job.publish("waiting", where="examples/ddp_train.py:52 (main)", stop="__main__:52#1")
    job.record(0)                         # RankRecord(rank=0, state='prompt', ...) or None (not heard from)
    job.try_lock_terminal(); job.unlock_terminal()
    job.release("__main__:52#1"); job.released("__main__:52#1")
    job.announce_quit("quit on rank 0"); job.quit_message()

Keys live under ``llmpdb/<run id>/<restart>/`` (torchrun) or ``llmpdb/`` (the default group's store, which
is already prefixed per group): ``rank/<N>`` (a JSON record), ``tty`` (the rank that reads the terminal, or
empty), ``release/<stop>`` (the prompting rank continued from that stop), ``policy`` (``rank0`` settings),
``handover`` (the rank ``rank K`` gave the terminal to), ``quit``, ``notice/<N>``, and ``events``: a counter
bumped by every write that can end or change a wait (a release, quit, hand-over, the terminal lock taken or
given back, a rank that prompts, runs on or ends, a notice). A waiting rank reads only that counter (one
``add(key, 0)``, one request) once a poll, and reads the rest only when it moved: ``bench/rank_scale_bench.py``.
Every other read first ``check``s the key: a ``get`` of a missing key would block until the store's timeout.
Nothing here is a collective, so no process-group timeout can fire while a rank waits.

Torch is imported only by ``connect_store``, which the debugger calls only under a launcher or once the
debuggee initialised ``torch.distributed``.
"""

from __future__ import annotations

import os
import sys
import time
from typing import NamedTuple

__all__ = ["RankRecord", "RankJob", "connect_store", "torchrun_prefix", "StoreUnavailable", "StoreGone", "ENDED_STATES",
           "DEFAULT_POLICY"]

ENDED_STATES = ("finished", "exited", "failed", "quit")
EXIT_CODE: list = []  # [code] once the program ended through ``sys.exit(code)`` (``python -m llmpdb`` sees it)
DEFAULT_POLICY = {"mode": "on", "skip": {}}


class StoreUnavailable(RuntimeError):
    """No c10d store can be reached: the ranks cannot coordinate (the message says why)."""


class StoreGone(RuntimeError):
    """This rank's launcher (torchrun's agent, which hosts the job's store) is gone: raised before any store
    call, so torch's C++ client never prints its "Broken pipe" warning with a stack for it."""


class RankRecord(NamedTuple):
    """What one rank last published: ``state`` is running, waiting, queued, prompt, finished, failed or quit."""

    rank: int
    state: str
    where: str = ""  # "examples/ddp_train.py:52 (main)": where it stopped (or last stopped, when running)
    stop: str = ""  # the stop's identity, "__main__:52#1": module, line and this rank's hit count
    host: str = ""
    pid: int = 0
    since: float = 0.0
    launcher: int = 0  # the parent's pid (torchrun's agent): ranks of one launcher share a terminal
    code: int | None = None  # the exit status, when the rank ended through ``sys.exit`` / ``SystemExit``


class RankJob:
    """This rank's view of the job: its own rank, the world size, the interactive rank, the store."""

    def __init__(self, store: object, rank: int, world: int, interactive: int, via: str = "",
                 launcher_pid: int = 0):
        self.store, self.rank, self.world, self.interactive, self.via = store, rank, world, interactive, via
        self.launcher_pid = launcher_pid  # the agent hosting the store (torchrun): its exit makes ``launcher_gone()`` true
        self._last_where = ""
        self.notices_seen = 0  # the notices this rank has printed (``relay_notices``)
        self.gone_said = False  # the prompting rank said the store is gone (once)

    def __repr__(self) -> str:
        return (f"RankJob(rank={self.rank}, world={self.world}, interactive={self.interactive}, via={self.via!r}, "
                f"launcher_pid={self.launcher_pid})")

    @property
    def is_interactive(self) -> bool:
        return self.rank == self.interactive

    # ---- plumbing --------------------------------------------------------------------------------
    def launcher_gone(self) -> bool:
        """Usage: ``job.launcher_gone()``; True once the launcher this rank started under has ended (a
        ``kill -9`` of torchrun leaves its workers as orphans): one ``getppid``, no store request."""
        return self.launcher_pid > 0 and os.getppid() != self.launcher_pid

    def _guard(self) -> None:
        if self.launcher_gone():
            raise StoreGone(f"torchrun (pid {self.launcher_pid}) is gone, and the job's store with it")

    def _get(self, key: str) -> str | None:
        self._guard()
        if not self.store.check([key]):
            return None
        return self.store.get(key).decode("utf-8", "replace")

    # ---- events ------------------------------------------------------------------------------------
    def events(self) -> int:
        """Usage: ``seen = job.events()``; how many times something a waiting rank must look at changed."""
        self._guard()
        return int(self.store.add("events", 0))

    def _bump(self) -> None:
        self._guard()
        self.store.add("events", 1)

    # ---- records -----------------------------------------------------------------------------------
    def publish(self, state: str, where: str = "", stop: str = "", code: int | None = None) -> None:
        """Usage: ``job.publish("waiting", where, stop)``; a running rank keeps its last stop's ``where``."""
        import json  # at first use: start-up stays cheap
        import socket  # at first use: start-up stays cheap
        self._guard()
        if where:
            self._last_where = where
        record = RankRecord(self.rank, state, where or self._last_where, stop, socket.gethostname(),
                            os.getpid(), time.time(), os.getppid(), code)
        self.store.set(f"rank/{self.rank}", json.dumps(record._asdict()))
        if state != "waiting":  # a rank that waits changes nothing for the others: 1,000 of them wake nobody
            self._bump()

    def record(self, rank: int) -> RankRecord | None:
        """Usage: ``job.record(0)``; None when that rank never published (it has not stopped yet)."""
        import json  # at first use: start-up stays cheap
        text = self._get(f"rank/{rank}")
        if text is None:
            return None
        try:
            data = json.loads(text)
            return RankRecord(**{k: data[k] for k in RankRecord._fields if k in data})
        except (ValueError, TypeError, KeyError):
            return RankRecord(rank, "?", where=f"unreadable record {text[:40]!r}")

    def records(self) -> dict[int, RankRecord | None]:
        return {rank: self.record(rank) for rank in range(self.world)}

    # ---- the terminal --------------------------------------------------------------------------------
    def terminal_owner(self) -> int | None:
        owner = self._get("tty")
        return int(owner) if owner and owner.isdigit() else None

    def try_lock_terminal(self) -> bool:
        """Take the terminal if nobody reads it (or this rank already does); True when this rank has it."""
        mine = str(self.rank)
        current = self.store.compare_set("tty", "", mine)
        return current == mine.encode()

    def lock_terminal(self) -> bool:
        """``try_lock_terminal`` that tells the waiting ranks when it takes the terminal."""
        taken = self.try_lock_terminal()
        if taken:
            self._bump()
        return taken

    def unlock_terminal(self) -> None:
        if self.store.compare_set("tty", str(self.rank), "") == b"":
            self._bump()

    # ---- stops, policy, quit -----------------------------------------------------------------------------
    def release(self, stop: str) -> None:
        """The prompting rank continued from ``stop``: the ranks waiting there resume."""
        self.store.set(f"release/{stop}", str(self.rank))
        self._bump()

    def released(self, stop: str) -> bool:
        return bool(self.store.check([f"release/{stop}"]))

    def policy(self) -> dict:
        import json  # at first use: start-up stays cheap
        text = self._get("policy")
        try:
            policy = json.loads(text) if text else {}
        except ValueError:
            policy = {}
        interactive = policy.get("interactive", self.interactive)
        return {"mode": policy.get("mode", "on"), "skip": dict(policy.get("skip", {})),
                "interactive": interactive if isinstance(interactive, int) else self.interactive}

    def set_policy(self, policy: dict) -> None:
        import json  # at first use: start-up stays cheap
        self.store.set("policy", json.dumps(policy))

    def hand_over(self, rank: int) -> None:
        """``rank K`` at the prompt: rank K takes the terminal at its stop and becomes the interactive rank."""
        policy = self.policy()
        policy["interactive"] = rank
        self.set_policy(policy)
        self.interactive = rank
        self.store.set("handover", f"{rank} {self.rank}")
        self._bump()

    def handed_to(self) -> tuple[int, int] | None:
        """(the rank given the terminal, the rank that gave it) while a hand-over is under way, else None."""
        words = (self._get("handover") or "").split()
        return (int(words[0]), int(words[1])) if len(words) == 2 and all(w.isdigit() for w in words) else None

    def take_handover(self) -> None:
        self.store.set("handover", "")

    def announce_quit(self, message: str) -> None:
        self.store.set("quit", message)
        self._bump()

    def quit_message(self) -> str | None:
        return self._get("quit")

    # ---- notices: lines a rank whose standard error is hidden asks the visible ranks to print -----------
    def notify(self, line: str) -> None:
        """Usage: ``job.notify("llmpdb r1: ... python -m llmpdb attach ...")``; numbered in the store."""
        number = int(self.store.add("notice/count", 1))
        self.store.set(f"notice/{number}", line)
        self._bump()

    def notices_after(self, seen: int) -> tuple[list[str], int]:
        """Usage: ``lines, seen = job.notices_after(seen)``; the notices numbered above ``seen``."""
        count = int(self.store.add("notice/count", 0))
        lines = []
        for number in range(seen + 1, count + 1):
            line = self._get(f"notice/{number}")
            if line is None:  # numbered, not written yet: read it at the next poll
                break
            lines.append(line)
            seen = number
        return lines, seen

    def at_exit(self) -> None:
        """Registered with ``atexit``: publish finished, exited (``sys.exit(N)`` seen by ``python -m llmpdb``:
        ``EXIT_CODE``), or failed (after an uncaught exception)."""
        try:
            failed = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
            code = EXIT_CODE[0] if EXIT_CODE else None
            state = "failed" if failed is not None else "exited" if code not in (None, 0) else "finished"
            if self.terminal_owner() == self.rank:
                self.unlock_terminal()
            record = self.record(self.rank)
            if record is None or record.state != "quit":
                self.publish(state, code=code if state == "exited" else None)
        except Exception:  # the agent's store may already be gone at exit: nothing left to tell
            pass


def torchrun_prefix() -> str:
    """Usage: ``torchrun_prefix()`` -> ``"llmpdb/<run id>/<restart>/"``: this job's keys in torchrun's store."""
    env = os.environ
    return f"llmpdb/{env.get('TORCHELASTIC_RUN_ID', 'run')}/{env.get('TORCHELASTIC_RESTART_COUNT', '0')}/"


def connect_store(timeout_s: float = 30.0) -> tuple[object, str]:
    """Usage: ``store, via = connect_store()``; raises ``StoreUnavailable`` with the reason.

    Under torchrun (``TORCHELASTIC_USE_AGENT_STORE=True``) a client of the agent's store at
    ``MASTER_ADDR:MASTER_PORT``, the same before and after ``init_process_group``; otherwise the default
    process group's store once the debuggee initialised it."""
    env = os.environ
    if env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true" and env.get("MASTER_ADDR") \
            and env.get("MASTER_PORT", "").isdigit():
        from datetime import timedelta

        import torch.distributed as dist

        try:
            client = dist.TCPStore(env["MASTER_ADDR"], int(env["MASTER_PORT"]), is_master=False,
                                   timeout=timedelta(seconds=timeout_s), wait_for_workers=False)
        except Exception as exc:
            raise StoreUnavailable(f"cannot reach torchrun's store at {env['MASTER_ADDR']}:"
                                   f"{env['MASTER_PORT']}: {type(exc).__name__}: {exc}") from None
        return dist.PrefixStore(torchrun_prefix(), client), f"torchrun store {env['MASTER_ADDR']}:{env['MASTER_PORT']}"
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        from torch.distributed import distributed_c10d

        # torch 2.13 has no public accessor for the default group's store (dir(torch.distributed) lists none)
        return dist.PrefixStore("llmpdb/", distributed_c10d._get_default_store()), "the default group's store"
    raise StoreUnavailable("no c10d store: not under torchrun and torch.distributed is not initialised")
