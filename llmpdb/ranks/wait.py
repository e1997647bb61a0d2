"""Waiting at a stop without a collective: poll the c10d store, sleep in between (no measurable CPU).

Usage::

    outcome, reason = wait_at_stop(job, "__main__:52#1", grace=5.0)
    # RESUME: the prompting rank continued from this stop; QUIT: the job was quit (reason says by whom);
    # PROMPT: this rank holds the terminal now (reason says why: the prompting rank handed it over with
    #         `rank K`, the interactive rank ended, or has been running elsewhere for ``grace`` seconds while
    #         this rank was stopped here alone)
    outcome, reason = wait_for_terminal(job)          # PROMPT once this rank holds the lock, or QUIT
    StepWatchdog(job, stop, where, message).start()   # a step into a collective releases the waiting ranks

A waiting rank sleeps ``poll`` seconds (default ``LLMPDB_RANK_POLL`` or 1) between reads of the job's event
counter (one store request), and reads the records, the lock and the keys only when the counter moved: a
paused job of 1,024 ranks costs the store about 1,000 requests a second, not tens of thousands
(``bench/rank_scale_bench.py``); a waiting rank uses well under 1% of a core (``bench/rank_wait_bench.py``)
and sees a continue or a quit within a poll.
The grace clock runs only while no rank is prompting: a stop elsewhere on the interactive rank (the first
line under ``python -m llmpdb``, a breakpoint of its own) holds it, and the interactive rank then gets
``grace`` seconds after it continues to arrive here.
"""

from __future__ import annotations

import atexit
import math
import os
import sys
import time

from .terminal import stderr_is_discarded
from .store import ENDED_STATES, RankJob

__all__ = ["wait_at_stop", "wait_for_terminal", "StepWatchdog", "RESUME", "QUIT", "PROMPT", "poll_interval", "grace_seconds",
           "relay_notices"]

RESUME, QUIT, PROMPT = "resume", "quit", "prompt"
_ACTIVE = ("prompt", "queued")


def poll_interval() -> float:
    """Usage: ``poll_interval()``; ``LLMPDB_RANK_POLL`` seconds (default 1, 0.01 to 60)."""
    return min(60.0, _env_seconds("LLMPDB_RANK_POLL", 1.0, 0.01))


def grace_seconds() -> float:
    """Usage: ``grace_seconds()``; ``LLMPDB_RANK_GRACE`` seconds (default 5, at most a day) before a lone rank
    prompts."""
    return min(86400.0, _env_seconds("LLMPDB_RANK_GRACE", 5.0, 0.0))


def _env_seconds(name: str, default: float, least: float) -> float:
    """``least`` to a week; ``default`` for what is not a finite number (time.sleep refuses inf)."""
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return min(7 * 24 * 3600.0, max(least, value)) if math.isfinite(value) else default


def relay_notices(job: RankJob) -> None:
    """Print on this rank's standard error the notices of ranks whose own is discarded (``job.notify``): the
    interactive rank under ``--local-ranks-filter`` with no terminal says there how to attach to it. A rank
    whose standard error is discarded too leaves them for the others."""
    if stderr_is_discarded():
        return
    lines, job.notices_seen = job.notices_after(job.notices_seen)
    stream = sys.stderr if sys.stderr is not None else sys.__stderr__
    for line in lines:
        try:
            stream.write(f"llmpdb r{job.rank} relays: {line}\n")
            stream.flush()
        except (OSError, ValueError, AttributeError):
            return


def _engaged_here(job: RankJob, stop: str):
    """(someone prompts or queues for this very stop, someone prompts anywhere, the interactive rank's record)."""
    boss = job.record(job.interactive)
    owner = job.terminal_owner()
    holder = job.record(owner) if owner is not None and owner != job.interactive else None
    here = any(r is not None and r.state in _ACTIVE and r.stop == stop for r in (boss, holder))
    busy = owner is not None or (boss is not None and boss.state in _ACTIVE)
    return here, busy, boss


def wait_at_stop(job: RankJob, stop: str, *, grace: float | None = None, poll: float | None = None,
                 clock=time.monotonic, sleep=time.sleep) -> tuple[str, str]:
    """Wait at ``stop`` until it is released, the job quits, or this rank must prompt (see module doc).

    Between changes a poll costs one store request (``job.events()``); the records, the lock and the keys are
    read again only when that counter moved, or when this rank's grace runs out."""
    grace = grace_seconds() if grace is None else grace
    poll = poll_interval() if poll is None else poll
    alone_since, seen, look_again, engaged = clock(), None, 0.0, False
    while True:
        count = job.events()
        if count == seen and clock() < look_again:
            sleep(poll)
            continue
        seen = count
        relay_notices(job)
        if job.released(stop):
            return RESUME, ""
        message = job.quit_message()
        if message is not None:
            return QUIT, message
        handover = job.handed_to()
        if handover is not None and handover[0] == job.rank:
            if wait_for_terminal(job, poll=poll, sleep=sleep)[0] == QUIT:
                return QUIT, job.quit_message() or "quit"
            job.take_handover()
            job.interactive = job.rank
            return PROMPT, f"rank {handover[1]} handed the terminal to rank {job.rank}"
        here, busy, boss = _engaged_here(job, stop)
        if here or busy or engaged:  # engaged until the event just seen: the grace starts now
            alone_since = clock()
        engaged = here or busy
        ended = boss is not None and boss.state in ENDED_STATES
        look_again = float("inf") if here or busy else alone_since + grace
        if not here and (ended or clock() - alone_since >= grace) and job.lock_terminal():
            if job.released(stop) or _engaged_here(job, stop)[0]:  # the interactive rank arrived meanwhile
                job.unlock_terminal()
                continue
            why = f"has {boss.state}" if ended else f"did not stop here within {grace:g} s"
            return PROMPT, (f"rank {job.interactive} {why}; rank {job.rank} stopped here alone and takes the "
                            "terminal (`ranks` shows the others)")
        sleep(poll)


def wait_for_terminal(job: RankJob, *, poll: float | None = None, sleep=time.sleep) -> tuple[str, str]:
    """Wait until this rank holds the terminal lock (PROMPT) or the job quits (QUIT, the message); between
    changes a poll costs one store request."""
    poll = poll_interval() if poll is None else poll
    seen = None
    while True:
        count = job.events()
        if count != seen:
            seen = count
            if job.lock_terminal():
                return PROMPT, ""
            relay_notices(job)
            message = job.quit_message()
            if message is not None:
                return QUIT, message
        sleep(poll)


def _cancel_armed_watchdogs() -> None:
    """At exit (a step that ran off the end of the program): no store call may run while the interpreter
    tears the store down."""
    for dog in list(_ARMED):
        dog.cancel()
        dog._thread.join(5)


_ARMED: set = set()
atexit.register(_cancel_armed_watchdogs)


class StepWatchdog:
    """Usage: ``dog = StepWatchdog(job, stop, where, message); dog.start(); ...; dog.cancel()``.

    Started when the prompting rank steps (``next``/``step``/``until``/``return``) while other ranks wait at
    its stop. A step that runs into a collective (an all-reduce in DDP's backward, a barrier) would wait for
    those ranks forever; if the step has not stopped again after ``grace`` seconds, the watchdog says so in one
    line (naming the waiting ranks) and releases the stop: they run on, join the collective, and wait at their
    next breakpoint. The prompting rank keeps the terminal and stops where its step ends."""

    def __init__(self, job: RankJob, stop: str, where: str, message, grace: float | None = None):
        import threading

        self.job, self.stop, self.where, self.message = job, stop, where, message
        self.grace = grace_seconds() if grace is None else grace
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="llmpdb-step-watchdog", daemon=True)
        self.fired = False

    def start(self) -> "StepWatchdog":
        _ARMED.add(self)
        self._thread.start()
        return self

    def cancel(self) -> None:
        self._done.set()
        _ARMED.discard(self)

    def _watch(self) -> None:
        if self._done.wait(self.grace):
            return
        try:
            if self.job.released(self.stop):
                return
            waiting = [rank for rank, record in self.job.records().items()
                       if record is not None and record.state == "waiting" and record.stop == self.stop]
            if not waiting:
                return
            self.fired = True
            names = ", ".join(str(rank) for rank in waiting)
            self.message(f"llmpdb r{self.job.rank}: the step has run {self.grace:g} s while rank(s) {names} wait at "
                         f"{self.where}; it may be waiting for them in a collective (all-reduce, barrier, DDP "
                         "backward): they run on to their next breakpoint")
            self.job.release(self.stop)
        except Exception as exc:  # the store is gone: the job is ending; nothing to release
            self.message(f"llmpdb r{self.job.rank}: step watchdog: {type(exc).__name__}: {exc}")
