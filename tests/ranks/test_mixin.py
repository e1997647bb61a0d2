"""The debugger as one rank of a two-rank job, in this process, on a real c10d HashStore (llmpdb.ranks.mixin).

Usage::

    python -m pytest tests/ranks/test_mixin.py -q

The other rank is a thread speaking the same store protocol. Real torchrun jobs are in
tests/e2e/test_torchrun.py.
"""

from __future__ import annotations

import threading
import time

import pytest

dist = pytest.importorskip("torch.distributed")

from llmpdb.ranks import mixin as distributed  # noqa: E402
from llmpdb.ranks.store import RankJob  # noqa: E402
from llmpdb.session import SESSION  # noqa: E402
from transcript import debug_transcript  # noqa: E402


@pytest.fixture
def as_rank(monkeypatch):
    """``as_rank(1)`` -> (this process's job as rank 1, rank 0's job), both on one store."""
    store = dist.PrefixStore("llmpdb/", dist.HashStore())
    monkeypatch.setattr(distributed, "_JOB", None)
    monkeypatch.setattr(SESSION, "_memories", {})
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LLMPDB_RANK_GRACE", "30")  # a rank that waited wrongly would hang past the timeout
    monkeypatch.setenv("LLMPDB_RANK_POLL", "0.02")

    def make(rank: int):
        monkeypatch.setenv("RANK", str(rank))
        job = RankJob(store, rank, 2, 0, "test")
        monkeypatch.setattr(distributed, "_JOB", job)
        return job, RankJob(store, 0, 2, 0, "test")

    return make


def loop(n):
    total = 0
    for i in range(n):
        breakpoint()
        total += i
    return total


LOOP_LINE = loop.__code__.co_firstlineno + 4  # `total += i`: where each breakpoint() stops


@pytest.mark.timeout(20)
def test_rank0_prompts_and_rank0_skip_runs_the_next_hits_through(as_rank):
    job, _ = as_rank(0)
    out = debug_transcript(loop, ["c", "ranks", "rank0 skip 2", "rank0", "c", "p i", "c", "c"], 5)
    assert out.count("(llmpdb r0) ") >= 5
    ranks = out.split("(llmpdb r0) ")[2]
    assert ranks.splitlines()[0].startswith("r0*  prompt at ")
    assert "test_mixin.py:" in ranks and "(loop) for " in ranks
    assert "r1   ? (not heard from: it has not stopped yet)" in ranks
    assert f"rank0: the next 2 hits of tests/ranks/test_mixin.py:{LOOP_LINE} (loop) run through on every rank" in out
    assert "  skip: hits up to #3 of " in out
    assert "(llmpdb r0) 3\n" in out  # hits 2 and 3 (i = 1, 2) ran through: the next stop is i = 3
    assert job.terminal_owner() is None and job.record(0).state == "running"
    assert job.policy()["skip"] != {}


@pytest.mark.timeout(20)
def test_rank1_waits_at_each_stop_until_rank0_continues_from_it(as_rank):
    job, boss = as_rank(1)
    seen = []

    def rank0():
        while len(seen) < 4:
            record = boss.record(1)
            if record is not None and record.state == "waiting" and record.stop not in [s for s, _ in seen]:
                seen.append((record.stop, record.where))
                boss.publish("prompt", record.where, record.stop)
                time.sleep(0.1)
                boss.release(record.stop)
            time.sleep(0.01)

    thread = threading.Thread(target=rank0, daemon=True)
    thread.start()
    out = debug_transcript(loop, ["p 'rank 1 must never read this'"], 3)
    thread.join(5)
    assert "(llmpdb" not in out and "never read" not in out
    assert len(seen) == 4  # the first line of loop, then three breakpoint() hits
    assert [stop.rsplit("#", 1)[1] for stop, _ in seen[1:]] == ["1", "2", "3"]
    assert all(where.endswith("(loop)") for _, where in seen)
    assert job.record(1).state == "running"


@pytest.mark.timeout(20)
def test_rank0_off_lets_rank1_run_through_every_breakpoint(as_rank):
    job, boss = as_rank(1)
    boss.set_policy({"mode": "off", "skip": {}})
    out = debug_transcript(loop, ["p 'rank 1 must never read this'"], 3)
    assert "(llmpdb" not in out
    assert job.record(1).state == "running"


def test_rank_commands_outside_a_job_say_so(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    out = debug_transcript(loop, ["ranks", "rank0 off", "c"], 0)
    assert "*** ranks: not in a distributed job of 2 or more ranks" in out
    assert "*** rank0: not in a distributed job of 2 or more ranks" in out


@pytest.mark.timeout(20)
def test_rank0_rejects_bad_arguments(as_rank):
    as_rank(0)
    out = debug_transcript(loop, ["rank0 maybe", "rank0 skip x", "ranks now", "c"], 0)
    assert "*** rank0: usage: rank0 [on | off | skip N] (got 'maybe')" in out
    assert "*** rank0: usage: rank0 [on | off | skip N] (got 'skip x')" in out
    assert "*** ranks: takes no arguments (usage: ranks)" in out


def test_without_a_store_each_rank_says_so_once_and_stops_on_its_own(monkeypatch):
    for name, value in (("_JOB", None), ("_NO_STORE", None), ("_GAVE_UP", False)):
        monkeypatch.setattr(distributed, name, value)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    out = debug_transcript(loop, ["c", "p i", "c"], 1)
    note = ("llmpdb r1: no c10d store: not under torchrun and torch.distributed is not initialised; "
            "this rank stops on its own")
    assert out.count(note) == 1, out
    assert "(llmpdb r1) 0\n" in out  # it prompted like plain pdb
    assert distributed._GAVE_UP is False  # the group may still be initialised: the next stop tries again


@pytest.mark.timeout(30)
def test_a_store_that_fails_mid_job_never_raises_into_the_program(monkeypatch):
    """The launcher (and its store) went away: the interactive rank says so once and prompts like plain pdb."""
    from datetime import timedelta

    server = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=2))
    client = dist.TCPStore("127.0.0.1", server.port, is_master=False, wait_for_workers=False,
                           timeout=timedelta(seconds=2))
    client.set("alive", "1")
    del server
    monkeypatch.setattr(SESSION, "_memories", {})
    monkeypatch.setattr(distributed, "_JOB", RankJob(client, 0, 2, 0, "test"))
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    out = debug_transcript(loop, ["c", "p i", "c"], 1)
    assert out.count("llmpdb r0: the job's store is gone (torchrun ended?): DistNetworkError; rank 0 keeps the "
                     "prompt and stops on its own") == 1, out
    assert "(llmpdb r0) 0\n" in out


@pytest.mark.timeout(20)
def test_debug_code_inside_a_job_prompt_keeps_the_terminal(as_rank):
    job, _ = as_rank(0)
    out = debug_transcript(loop, ["debug len([1])", "c", "ranks", "c", "c"], 1)
    after_debug = out.split("((llmpdb r0)) ")[-1]
    assert "r0*  prompt at " in after_debug, out  # the recursive debugger's `c` did not release the job
    assert job.terminal_owner() is None and job.record(0).state == "running"
