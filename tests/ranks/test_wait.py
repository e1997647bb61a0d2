"""The store protocol (llmpdb.ranks.store) and the waiting loop (llmpdb.ranks.wait) on a real c10d HashStore,
with two ranks as two threads of this process.

Usage::

    python -m pytest tests/ranks/test_wait.py -q
"""

from __future__ import annotations

import threading
import time

import pytest

dist = pytest.importorskip("torch.distributed")

from llmpdb.ranks.wait import PROMPT, QUIT, RESUME, wait_at_stop, wait_for_terminal  # noqa: E402
from llmpdb.ranks.store import RankJob  # noqa: E402

STOP = "__main__:52#1"


@pytest.fixture
def ranks():
    """(rank 0's job, rank 1's job), sharing one store; rank 0 is the interactive rank."""
    store = dist.PrefixStore("llmpdb/", dist.HashStore())
    return RankJob(store, 0, 2, 0, "test"), RankJob(store, 1, 2, 0, "test")


def _later(seconds: float, action) -> threading.Thread:
    def run():
        time.sleep(seconds)
        action()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_records_round_trip_and_a_silent_rank_is_none(ranks):
    boss, worker = ranks
    assert worker.record(0) is None
    boss.publish("prompt", "examples/ddp_train.py:52 (main)", STOP)
    record = worker.record(0)
    assert (record.rank, record.state, record.where, record.stop) == (0, "prompt", "examples/ddp_train.py:52 (main)",
                                                                       STOP)
    assert record.pid > 0 and record.host
    boss.publish("running")  # a running rank keeps the place of its last stop
    assert worker.record(0).where == "examples/ddp_train.py:52 (main)" and worker.record(0).stop == ""


def test_the_terminal_lock_has_one_holder_at_a_time(ranks):
    boss, worker = ranks
    assert boss.try_lock_terminal() and boss.try_lock_terminal()  # taking it again while holding it is fine
    assert not worker.try_lock_terminal()
    assert worker.terminal_owner() == 0
    worker.unlock_terminal()  # not the holder: no effect
    assert boss.terminal_owner() == 0
    boss.unlock_terminal()
    assert worker.try_lock_terminal() and worker.terminal_owner() == 1


def test_a_waiting_rank_resumes_when_its_stop_is_released(ranks):
    boss, worker = ranks
    boss.try_lock_terminal()
    boss.publish("prompt", "x.py:52 (main)", STOP)
    _later(0.3, lambda: boss.release(STOP))
    started = time.monotonic()
    assert wait_at_stop(worker, STOP, grace=0.05, poll=0.02) == (RESUME, "")
    assert time.monotonic() - started >= 0.25  # the grace never applies while rank 0 prompts at this stop


def test_a_waiting_rank_ends_on_quit(ranks):
    boss, worker = ranks
    boss.publish("prompt", "x.py:52 (main)", STOP)
    _later(0.1, lambda: boss.announce_quit("quit on rank 0"))
    assert wait_at_stop(worker, STOP, grace=60, poll=0.02) == (QUIT, "quit on rank 0")


def test_a_lone_rank_prompts_at_once_when_rank0_has_finished(ranks):
    boss, worker = ranks
    boss.publish("finished")
    assert wait_at_stop(worker, STOP, grace=60, poll=0.02) == (
        PROMPT, "rank 0 has finished; rank 1 stopped here alone and takes the terminal (`ranks` shows the others)")
    assert worker.terminal_owner() == 1


def test_a_lone_rank_prompts_after_the_grace_while_rank0_runs_elsewhere(ranks):
    boss, worker = ranks
    boss.publish("running")
    started = time.monotonic()
    outcome, reason = wait_at_stop(worker, STOP, grace=0.3, poll=0.02)
    assert outcome == PROMPT
    assert reason.startswith("rank 0 did not stop here within 0.3 s; rank 1 stopped here alone and takes the terminal")
    assert time.monotonic() - started >= 0.3


def test_the_grace_clock_waits_while_rank0_prompts_elsewhere(ranks):
    """Rank 0 at its first line (python -m llmpdb) for longer than the grace, then it arrives here."""
    boss, worker = ranks
    boss.try_lock_terminal()
    boss.publish("prompt", "x.py:1 (<module>)", "__main__:1#1")

    def arrive():
        boss.publish("running")
        boss.unlock_terminal()
        time.sleep(0.05)
        boss.publish("queued", "x.py:52 (main)", STOP)
        boss.try_lock_terminal()
        boss.publish("prompt", "x.py:52 (main)", STOP)
        _later(0.2, lambda: boss.release(STOP))

    _later(1.0, arrive)
    assert wait_at_stop(worker, STOP, grace=0.5, poll=0.02) == (RESUME, "")


def test_the_interactive_rank_queues_for_the_terminal_a_lone_rank_holds(ranks):
    boss, worker = ranks
    worker.try_lock_terminal()
    _later(0.2, worker.unlock_terminal)
    assert wait_for_terminal(boss, poll=0.02) == (PROMPT, "")
    assert boss.terminal_owner() == 0
    worker.announce_quit("quit on rank 0")
    assert wait_for_terminal(worker, poll=0.02) == (QUIT, "quit on rank 0")


def test_policy_defaults_and_round_trips(ranks):
    boss, worker = ranks
    assert worker.policy() == {"mode": "on", "skip": {}, "interactive": 0}
    boss.set_policy({"mode": "off", "skip": {"__main__:52": 4}})
    assert worker.policy() == {"mode": "off", "skip": {"__main__:52": 4}, "interactive": 0}


def test_rank_k_hands_the_terminal_to_a_waiting_rank(ranks):
    boss, worker = ranks
    boss.try_lock_terminal()
    boss.publish("prompt", "x.py:52 (main)", STOP)

    def hand_over():
        boss.hand_over(1)
        boss.publish("waiting", "x.py:52 (main)", STOP)
        boss.unlock_terminal()

    _later(0.2, hand_over)
    assert wait_at_stop(worker, STOP, grace=60, poll=0.02) == (PROMPT, "rank 0 handed the terminal to rank 1")
    assert worker.terminal_owner() == 1 and worker.handed_to() is None
    assert worker.interactive == 1 and boss.policy()["interactive"] == 1
    worker.publish("prompt", "x.py:52 (main)", STOP)
    _later(0.2, lambda: worker.release(STOP))
    assert wait_at_stop(boss, STOP, grace=0.05, poll=0.02) == (RESUME, "")  # rank 0 waits for rank 1 now


class _Counting:
    """The store a rank sees, counting the requests it sends."""

    def __init__(self, store):
        self.store, self.calls = store, []

    def __getattr__(self, name):
        method = getattr(self.store, name)

        def counted(*args, **kwargs):
            self.calls.append(name)
            return method(*args, **kwargs)
        return counted


def test_a_paused_rank_costs_one_store_request_a_poll_and_wakes_on_release():
    """At 1,024 ranks a poll of every key was tens of thousands of requests a second on rank 0's host: while
    nothing changes a waiting rank reads one counter; a release (any change that matters) wakes it."""
    store = dist.PrefixStore("llmpdb/", dist.HashStore())
    boss = RankJob(store, 0, 4, 0, "test")
    counting = _Counting(store)
    worker = RankJob(counting, 2, 4, 0, "test")
    boss.try_lock_terminal()
    boss.publish("prompt", "x.py:52 (main)", STOP)
    other = RankJob(store, 1, 4, 0, "test")
    polls = []

    def sleep(seconds):
        polls.append(seconds)
        if len(polls) == 5:
            other.publish("waiting", "x.py:52 (main)", STOP)  # another rank arriving wakes nobody
        if len(polls) == 40:
            boss.release(STOP)
        time.sleep(0.001)

    assert wait_at_stop(worker, STOP, grace=3600, poll=0.5, sleep=sleep) == (RESUME, "")
    first_look = counting.calls.index("add", counting.calls.index("add") + 1)  # the full look ends at the 2nd poll
    steady = counting.calls[first_look:]
    assert steady.count("add") >= 39
    assert len(steady) - steady.count("add") <= 12, steady  # one look after the release, nothing between
    assert len(polls) == 40 and set(polls) == {0.5}


def test_bad_poll_and_grace_settings_fall_back_to_the_defaults(monkeypatch):
    from llmpdb.ranks.wait import grace_seconds, poll_interval

    for value in ("inf", "nan", "-inf", "abc", "1e400"):
        monkeypatch.setenv("LLMPDB_RANK_POLL", value)
        monkeypatch.setenv("LLMPDB_RANK_GRACE", value)
        assert poll_interval() == 1.0 and grace_seconds() == 5.0
    monkeypatch.setenv("LLMPDB_RANK_POLL", "1e9")
    assert poll_interval() == 60.0
