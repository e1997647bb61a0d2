"""CPU use of a rank that waits while another rank sits at the llmpdb prompt, against a rank parked in a barrier.

Usage::

    python bench/rank_wait_bench.py [--seconds 5] [--poll 0.2]

Starts two processes with a gloo process group on the CPU (as torchrun would: ``RANK``, ``WORLD_SIZE``,
``MASTER_ADDR``/``MASTER_PORT``). Rank 0 plays the prompting rank: it holds the pause for ``--seconds``
and continues. Rank 1 measures its own process CPU time (all threads) over wall time in three waits of the
same length, in one run: llmpdb's wait (``llmpdb.ranks.wait.wait_at_stop``: store reads every ``--poll``
seconds, the way a rank waits at a breakpoint, with its ``ranks --job`` watcher thread running), ``torch.distributed.barrier()`` (what
``torch.distributed.breakpoint()`` parks the other ranks in), and a plain ``time.sleep`` (the floor: the
process's own background threads). The goal for llmpdb's wait is under 1% of a core. Also printed: how
long after rank 0 continued rank 1 resumed.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STOP = "__main__:52#1"


def _measure(wait) -> dict:
    cpu, wall = time.process_time(), time.monotonic()
    wait()
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    return {"cpu_s": cpu, "wall_s": wall, "resumed_at": time.time()}


def worker(seconds: float, poll: float) -> None:
    sys.path.insert(0, ROOT)
    from datetime import timedelta

    import torch.distributed as dist

    from llmpdb.ranks.dump import start_watcher
    from llmpdb.ranks.wait import wait_at_stop
    from llmpdb.ranks.store import RankJob

    dist.init_process_group("gloo", timeout=timedelta(seconds=max(60.0, 4 * seconds)))
    rank = dist.get_rank()
    store = dist.PrefixStore("llmpdb-bench/", dist.distributed_c10d._get_default_store())
    job = RankJob(store, rank, 2, 0, "bench")
    results = {}
    dist.barrier()
    if rank == 0:  # the prompting rank: hold each pause, then continue
        job.try_lock_terminal()
        job.publish("prompt", "bench:52 (main)", STOP)
        time.sleep(seconds)
        store.set("released_at", repr(time.time()))
        job.release(STOP)
        job.unlock_terminal()
        time.sleep(seconds)
        store.set("barrier_at", repr(time.time()))
        dist.barrier()
        dist.barrier()  # rank 1 sleeps in between
    else:
        start_watcher(job, None)  # as in a real rank: the thread that answers `python -m llmpdb ranks --job`
        job.publish("waiting", "bench:52 (main)", STOP)
        results["llmpdb wait (store poll)"] = _measure(lambda: wait_at_stop(job, STOP, grace=3600, poll=poll))
        results["llmpdb wait (store poll)"]["continued_at"] = float(store.get("released_at"))
        results["torch.distributed.barrier"] = _measure(dist.barrier)
        results["torch.distributed.barrier"]["continued_at"] = float(store.get("barrier_at"))
        results["time.sleep (floor)"] = _measure(lambda: time.sleep(seconds))
        dist.barrier()
        print("RESULTS " + json.dumps(results), flush=True)
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each pause (default 5)")
    parser.add_argument("--poll", type=float, default=0.2, help="llmpdb's poll interval (default 0.2 s)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.seconds, args.poll)
        return
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), WORLD_SIZE="2",
               OMP_NUM_THREADS="1")
    command = [sys.executable, os.path.abspath(__file__), "--worker", "--seconds", str(args.seconds),
               "--poll", str(args.poll)]
    procs = [subprocess.Popen(command, env=dict(env, RANK=str(rank), LOCAL_RANK=str(rank)),
                              stdout=subprocess.PIPE, text=True) for rank in range(2)]
    try:
        outputs = [proc.communicate(timeout=60 + 4 * args.seconds)[0] for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    line = next((l for l in outputs[1].splitlines() if l.startswith("RESULTS ")), None)
    if line is None or any(proc.returncode for proc in procs):
        raise SystemExit(f"bench failed: exit status {[proc.returncode for proc in procs]}")
    results = json.loads(line[len("RESULTS "):])
    print(f"rank 1 waiting {args.seconds:g} s while rank 0 pauses (llmpdb polls every {args.poll:g} s); "
          "CPU = process CPU time / wall time, one core = 100%")
    print(f"{'how rank 1 waits':<28}  {'CPU':>7}  {'vs 1% goal':>10}  resumed after rank 0 continued")
    for name, result in results.items():
        share = 100 * result["cpu_s"] / result["wall_s"]
        verdict = ("ok" if share < 1 else "OVER") if name.startswith("llmpdb") else ""
        lag = f"{1000 * (result['resumed_at'] - result['continued_at']):.0f} ms" if "continued_at" in result else ""
        print(f"{name:<28}  {share:6.2f}%  {verdict:>10}  {lag}")


if __name__ == "__main__":
    main()
