"""The ``rank0``, ``ranks`` and ``rank`` commands: the job's stop policy, where every rank is, hand-over.

Usage (at the prompt of a job started by torchrun)::

    (llmpdb r0) ranks            # r1  waiting at examples/ddp_train.py:52 (main)  host  pid 4242
    (llmpdb r0) rank0            # show the policy
    (llmpdb r0) rank0 off        # the other ranks run through breakpoints; this rank still prompts
    (llmpdb r0) rank0 skip 3     # the next 3 hits of this stop's breakpoint run through on every rank
    (llmpdb r0) rank 1           # rank 1 prompts at its stop, (llmpdb r1); rank 0 waits until it continues

Both read and write only what the ranks publish in the c10d store (``llmpdb.ranks.store``); the mixin that
uses them (``DistributedMixin``) provides ``_rank_job()`` and ``_rank_origin``.
"""

from __future__ import annotations

import time

from ..commands._command import CommandError, command, parse_args
from .store import RankJob, RankRecord

__all__ = ["RankCommands", "describe_rank", "rank_table"]

_MOST_ROWS = 24  # past this many rows, ranks in the same state on different hosts share a row

_STATES = {
    "waiting": "waiting at {where}",
    "queued": "queued for the terminal at {where}",
    "prompt": "prompt at {where}",
    "running": "running (last stop {where})",
    "finished": "finished",
    "exited": "exited (code {code})",
    "failed": "failed (last stop {where})",
    "quit": "quit",
}


def describe_rank(record: RankRecord | None, now: float | None = None, *, timed: bool = True) -> str:
    """Usage: ``describe_rank(job.record(1))`` -> ``"waiting at train.py:52 (main) for 12 s"`` (``timed=False``:
    without ``for 12 s``)."""
    if record is None:
        return "? (not heard from: it has not stopped yet)"
    text = _STATES.get(record.state, record.state + " {where}").format(where=record.where or "?",
                                                                      code=record.code)
    text = text.replace(" (last stop ?)", "")
    if timed and record.state in ("waiting", "queued", "prompt") and record.since:
        text += f" for {max(0, int((now or time.time()) - record.since))} s"
    return text


def _span(first: int, last: int) -> str:
    return f"r{first}" if first == last else f"r{first}–r{last}"


def rank_table(records: dict[int, RankRecord | None], owner: int | None, now: float) -> list[str]:
    """Usage: ``rank_table(job.records(), job.terminal_owner(), time.time())`` -> the lines of ``ranks``.

    Consecutive ranks in the same state at the same place share a row (``r1–r1023  waiting at
    train.py:88 (main)  8 hosts``), so the table fits a screen at any number of ranks; a rank alone in its
    state keeps its host and pid. ``*`` marks the rank reading the terminal. Past ``_MOST_ROWS`` rows the
    host no longer splits a group."""
    def rows(by_host: bool) -> list[tuple[str, str, str]]:
        groups: list[list] = []  # [first, last, state, hosts, record]
        for rank in sorted(records):
            record = records[rank]
            state = describe_rank(record, now)
            key = (describe_rank(record, timed=False) if rank != owner else None,
                   record.host if (by_host and record) else None)
            last = groups[-1] if groups else None
            if last is not None and last[5] == key and key[0] is not None and last[1] == rank - 1 \
                    and (record is None) == (last[4] is None):
                last[1] = rank
                last[3].add(record.host if record else "")
                continue
            groups.append([rank, rank, state, {record.host if record else ""}, record, key])
        out = []
        for first, last, state, hosts, record, _ in groups:
            mark = "*" if first == last == owner else " "
            if first == last:
                where = f"{record.host}  pid {record.pid}" if record is not None else ""
            else:
                hosts.discard("")
                count = last - first + 1
                where = (next(iter(hosts)) if len(hosts) == 1 else f"{len(hosts)} hosts") if hosts else ""
                where = f"{where}  {count} ranks".strip()
                state = describe_rank(record, timed=False)  # the times differ from rank to rank
            out.append((_span(first, last) + mark, state, where))
        return out

    table = rows(by_host=True)
    if len(table) > _MOST_ROWS:
        table = rows(by_host=False)
    widths = [max(len(row[i]) for row in table) for i in range(2)]
    return [f"{label:<{widths[0]}}  {state:<{widths[1]}}  {where}".rstrip() for label, state, where in table]


class RankCommands:
    """``rank0``, ``ranks`` and ``rank K``; outside a job of 2+ ranks each says so in one line."""

    def _job_or_error(self) -> RankJob:
        job = self._rank_job()
        if job is None:
            raise CommandError("not in a distributed job of 2 or more ranks (WORLD_SIZE, or no c10d store)")
        return job

    @command
    def do_ranks(self, arg):
        """ranks
        Every rank of the job: its state (waiting at file:line, prompt, running, finished, failed, quit), its
        host and pid, from what the ranks publish in the c10d store. `*` marks the rank reading the terminal.
        Example: ranks"""
        if parse_args(arg, self.do_ranks).words:
            raise CommandError("takes no arguments (usage: ranks)")
        job = self._job_or_error()
        try:
            records, owner = job.records(), job.terminal_owner()
        except Exception as exc:  # the launcher hosting the store is gone: one line, not a Broken pipe traceback
            gone = (f"torchrun (pid {job.launcher_pid}) is gone, and the job's store with it" if job.launcher_gone()
                    else f"the job's store does not answer ({type(exc).__name__}; torchrun ended?)")
            raise CommandError(f"{gone}: no rank states to show") from None
        for line in rank_table(records, owner, time.time()):
            self.message(line)

    @command
    def do_rank(self, arg):
        """rank K
        Hand the terminal to rank K, which must be waiting at a stop: its prompt opens there, and it is the
        interactive rank at the next stops. This rank waits here until rank K continues (`c`).
        Example: rank 1"""
        words = parse_args(arg, self.do_rank).words
        job = self._job_or_error()
        if len(words) != 1 or not words[0].isdigit():
            raise CommandError("usage: rank K (K a rank number; `ranks` lists them)")
        rank = int(words[0])
        if rank >= job.world:
            raise CommandError(f"no rank {rank}: the job has ranks 0 to {job.world - 1}")
        if rank == job.rank:
            raise CommandError(f"rank {rank} is this rank")
        record = job.record(rank)
        if record is None or record.state != "waiting":
            raise CommandError(f"rank {rank} is {describe_rank(record)}: it can take the terminal only while it "
                               "waits at a stop")
        if self._rank_origin is None:
            raise CommandError("this rank is not at a stop of the job")
        self._rank_handover = rank
        self.message(f"rank: rank {rank} takes the terminal; rank {job.rank} waits here until it continues")
        return 1

    @command
    def do_rank0(self, arg):
        """rank0 [on | off | skip N]
        The job's stop policy. on (default): one rank (LLMPDB_RANK, default 0) prompts, the others wait at
        the same breakpoint and resume when it continues. off: the other ranks run through breakpoints.
        skip N: the next N hits of the breakpoint this stop began at run through on every rank.
        Example: rank0 skip 3"""
        args = parse_args(arg, self.do_rank0)
        job = self._job_or_error()
        policy = job.policy()
        words = args.words
        if not words:
            self._show_policy(job, policy)
            return
        if words[0] in ("on", "off") and len(words) == 1:
            policy["mode"] = words[0]
            job.set_policy(policy)
            self._show_policy(job, policy)
            return
        if words[0] == "skip" and len(words) == 2 and words[1].isdigit():
            origin = self._rank_origin
            if origin is None or "#" not in origin:
                raise CommandError("skip needs a breakpoint stop of this rank")
            location, hit = origin.rsplit("#", 1)
            policy["skip"][location] = int(hit) + int(words[1])
            job.set_policy(policy)
            self.message(f"rank0: the next {words[1]} hits of {self._rank_where or location} run through on "
                         "every rank")
            return
        raise CommandError(f"usage: rank0 [on | off | skip N] (got {args.rest.strip()!r})")

    def _show_policy(self, job: RankJob, policy: dict) -> None:
        others, interactive = job.world - 1, policy["interactive"]
        if policy["mode"] == "on":
            self.message(f"rank0 on: rank {interactive} prompts; the other {others} rank(s) wait at the same "
                         "breakpoint and resume when it continues")
        else:
            self.message(f"rank0 off: rank {interactive} prompts; the other {others} rank(s) run through "
                         "breakpoints")
        for location, until in sorted(policy["skip"].items()):
            self.message(f"  skip: hits up to #{until} of {location} run through on every rank")
