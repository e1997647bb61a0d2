"""How rank coordination scales: N simulated ranks (threads running llmpdb's own ``ranks/`` code) against one real
``TCPStore``, each rank with its own client socket, as torchrun's workers have.

Usage::

    python bench/rank_scale_bench.py                      # N = 16, 256, 1024
    python bench/rank_scale_bench.py --ranks 16,64 --pause 3

For each N: rank 0 prompts at a stop (holds the terminal lock, published ``prompt``) and ranks 1..N-1 wait there
in ``wait_at_stop``. Printed per N, for llmpdb's design (one event counter read per poll) and, measured in the
same run, for the polling design before it (``legacy``: every key read every 0.2 s):

- store requests per second while paused, and per rank per second (goal: <= 1);
- the time for ``c`` (rank 0 releases the stop) and for ``q`` (rank 0 announces quit) to reach every rank
  (goal: <= 2 s at 1,024 ranks);
- how many lines ``ranks`` prints (goal: a screen at any N).

The legacy loop is CPU-bound here long before 1,024 ranks (its clients cannot issue the requests it asks
for on a small machine): its figure is what it managed, and above 256 ranks it is not run.

Measured here (2 cores, other work running): 1,024 ranks paused cost 1.00 store request per rank per second
(1,023/s in all), `c` reached every rank in 1.70 s and `q` in 1.00 s, and `ranks` printed 2 lines; the
legacy loop cost 17.9-38.4 requests per rank per second at 16-256 ranks.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from datetime import timedelta

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch.distributed as dist  # noqa: E402

from llmpdb.ranks.commands import rank_table  # noqa: E402
from llmpdb.ranks.store import RankJob  # noqa: E402
from llmpdb.ranks.wait import PROMPT, QUIT, RESUME, _engaged_here, wait_at_stop  # noqa: E402

STOP = "__main__:88#1"
WHERE = "train.py:88 (main)"


class Counting:
    """A store client that counts the requests it sends (every call is one round trip to the server)."""

    total = 0
    lock = threading.Lock()

    def __init__(self, store):
        self._store = store

    def __getattr__(self, name):
        method = getattr(self._store, name)

        def counted(*args, **kwargs):
            with Counting.lock:
                Counting.total += 1
            return method(*args, **kwargs)
        return counted


def legacy_wait(job: RankJob, stop: str, poll: float = 0.2) -> tuple[str, str]:
    """The loop before the event counter: every key read at every poll."""
    while True:
        job.notices_after(job.notices_seen)
        if job.released(stop):
            return RESUME, ""
        message = job.quit_message()
        if message is not None:
            return QUIT, message
        job.handed_to()
        _engaged_here(job, stop)
        time.sleep(poll)


def _job(port: int, rank: int, world: int, prefix: str) -> RankJob:
    client = dist.TCPStore("127.0.0.1", port, is_master=False, wait_for_workers=False, timeout=timedelta(seconds=60))
    return RankJob(Counting(dist.PrefixStore(prefix, client)), rank, world, 0, "bench")


def one_round(port: int, world: int, pause: float, design: str, action: str) -> tuple[float, float]:
    """(requests per second while paused, seconds for ``action`` to reach every rank)."""
    prefix = f"bench/{design}/{world}/{action}/{time.monotonic_ns()}/"
    boss = _job(port, 0, world, prefix)
    boss.try_lock_terminal()
    boss.publish("prompt", WHERE, STOP)
    jobs = [_job(port, rank, world, prefix) for rank in range(1, world)]
    ended: list[float] = []
    started = threading.Barrier(world)

    def rank_main(job: RankJob) -> None:
        job.publish("waiting", WHERE, STOP)
        started.wait()
        outcome = (wait_at_stop(job, STOP, grace=3600.0) if design == "llmpdb" else legacy_wait(job, STOP))[0]
        assert outcome in (RESUME, QUIT), outcome
        with Counting.lock:
            ended.append(time.monotonic())

    threads = [threading.Thread(target=rank_main, args=(job,), daemon=True) for job in jobs]
    for thread in threads:
        thread.start()
    started.wait()
    time.sleep(min(2.0, pause / 2))  # every rank has made its first full look
    before, t0 = Counting.total, time.monotonic()
    time.sleep(pause)
    rate = (Counting.total - before) / (time.monotonic() - t0)
    sent = time.monotonic()
    if action == "c":
        boss.release(STOP)
    else:
        boss.announce_quit("quit on rank 0")
    for thread in threads:
        thread.join(120)
    return rate, (max(ended) - sent) if ended else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", default="16,256,1024")
    parser.add_argument("--pause", type=float, default=5.0)
    args = parser.parse_args()
    os.environ["LLMPDB_RANK_POLL"] = os.environ.get("LLMPDB_RANK_POLL", "1")
    server = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=60))
    print(f"rank coordination at scale: one TCPStore on 127.0.0.1, LLMPDB_RANK_POLL={os.environ['LLMPDB_RANK_POLL']} s, "
          f"pause {args.pause:g} s, {os.cpu_count()} cores")
    print(f"{'ranks':>6}  {'design':<7} {'req/s paused':>13} {'per rank/s':>11} {'c reaches all':>14} "
          f"{'q reaches all':>14} {'ranks lines':>12}")
    for world in [int(n) for n in args.ranks.split(",")]:
        rows = {}
        for design in ("llmpdb", "legacy"):
            if design == "legacy" and world > 256:
                print(f"{world:>6}  legacy  not run: at ~45 requests per rank per second its clients saturate this "
                      "machine's cores before the store (256 ranks already measure its trend)")
                continue
            pause = args.pause
            rate_c, c_time = one_round(server.port, world, pause, design, "c")
            _, q_time = one_round(server.port, world, min(pause, 2.0), design, "q")
            rows[design] = rate_c
            now = time.time()
            from llmpdb.ranks.store import RankRecord

            records = {r: RankRecord(r, "prompt" if r == 0 else "waiting", WHERE, STOP, f"node{r // 8}", 1000 + r,
                                     now) for r in range(world)}
            lines = len(rank_table(records, 0, now))
            print(f"{world:>6}  {design:<7} {rate_c:>13.0f} {rate_c / max(1, world - 1):>11.2f} {c_time:>13.2f}s "
                  f"{q_time:>13.2f}s {lines:>12}")
        if "legacy" in rows:
            print(f"{'':>6}  legacy/llmpdb store requests while paused: "
                  f"{rows['legacy'] / max(rows['llmpdb'], 1e-9):.1f}x"
                  + ("  (legacy CPU-bound here: it asks for ~45 per rank per second)" if world > 64 else ""))
    del server


if __name__ == "__main__":
    main()
