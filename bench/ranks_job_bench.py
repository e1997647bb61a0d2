"""How long ``python -m llmpdb ranks --job`` takes against a paused 4-rank torchrun job, against the 0.5 s goal.

Usage::

    python bench/ranks_job_bench.py [--ranks 4] [--runs 5]

Starts ``torchrun --nproc-per-node 4 examples/ddp_train.py`` (gloo on the CPU) in a pseudo-terminal with
``PYTHONBREAKPOINT=llmpdb.set_trace``: rank 0 prompts at the breakpoint, the other ranks wait there. Then, in
the same run:

- ``ranks --job`` as a user types it, from another process (``python -m llmpdb ranks --job``): the median
  wall time of ``--runs`` runs, each checked to show every rank's stack;
- the same request inside one process that has imported torch already (``llmpdb.ranks.jobs.main``): what the
  round trip to the ranks costs without the interpreter's and torch's start-up;
- ``py-spy dump --pid`` of each rank, one after the other, when ``py-spy`` is installed (else a note).

Each figure is printed with its ratio to the 0.5 s goal. The job is ended (``q``, then SIGKILL of the
process groups it started) whatever happens.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import pexpect

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOAL_S = 0.5
_IN_PROCESS = """
import io, contextlib, sys, time
import torch.distributed  # what the command imports; timed apart
from llmpdb.ranks import jobs
times = []
for _ in range({runs}):
    out = io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out):
        code = jobs.main(["--job", "--timeout", "10"])
    times.append(time.perf_counter() - started)
    assert code == 0 and out.getvalue().count("=== rank ") == {ranks}, out.getvalue()
print(" ".join(f"{{t:.4f}}" for t in times))
"""


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as handle:
                    if int(handle.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return found


def _median_line(name: str, seconds: list[float]) -> str:
    median = statistics.median(seconds)
    return f"{name:<44} {median * 1000:8.1f} ms  {median / GOAL_S:6.2f}x the {GOAL_S:g} s goal  (runs: " + \
        ", ".join(f"{s * 1000:.0f}" for s in seconds) + " ms)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="llmpdb-ranks-bench-")
    env = {**os.environ, "PYTHONPATH": ROOT, "PYTHONBREAKPOINT": "llmpdb.set_trace", "NO_COLOR": "1",
           "TMPDIR": tmp, "DDP_TIMEOUT": "600", "LLMPDB_RANK_GRACE": "600", "OMP_NUM_THREADS": "1"}
    env.pop("LLMPDB_RANK", None)
    child = pexpect.spawn(sys.executable, ["-m", "torch.distributed.run", "--nproc-per-node", str(args.ranks),
                                           "--monitor-interval", "0.1", "examples/ddp_train.py"],
                          cwd=ROOT, env=env, encoding="utf-8", timeout=120, dimensions=(50, 120))
    workers: list[int] = []
    try:
        child.expect(r"\(llmpdb r0\) ")
        workers = _children(child.pid)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # every rank at the breakpoint: `ranks` shows them waiting
            child.sendline("ranks")
            child.expect(r"\(llmpdb r0\) ")
            if child.before.count("waiting at ") == args.ranks - 1:
                break
            time.sleep(0.5)
        cli_env = {**env, "PYTHONBREAKPOINT": ""}
        print(f"ranks --job against a paused {args.ranks}-rank torchrun job (gloo, CPU), median of {args.runs}")
        cli = []
        for _ in range(args.runs):
            started = time.perf_counter()
            out = subprocess.run([sys.executable, "-m", "llmpdb", "ranks", "--job", "--timeout", "10"], cwd=ROOT,
                                 env=cli_env, capture_output=True, text=True, timeout=60)
            cli.append(time.perf_counter() - started)
            if out.returncode != 0 or out.stdout.count("=== rank ") != args.ranks:
                print(f"ranks --job failed (exit status {out.returncode}):\n{out.stdout}\n{out.stderr}")
                return 1
        warm = subprocess.run([sys.executable, "-c", "import torch.distributed"], env=cli_env, timeout=60)  # page cache
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch.distributed"], env=cli_env, timeout=60, check=True)
        torch_import = time.perf_counter() - started
        inner = subprocess.run([sys.executable, "-c", _IN_PROCESS.format(runs=args.runs, ranks=args.ranks)],
                               cwd=ROOT, env=cli_env, capture_output=True, text=True, timeout=120)
        if inner.returncode != 0:
            print(f"in-process ranks --job failed:\n{inner.stdout}\n{inner.stderr}")
            return 1
        print(_median_line("python -m llmpdb ranks --job (whole command)", cli))
        print(_median_line("  the same, inside one running process", [float(t) for t in inner.stdout.split()]))
        print(f"  python -c 'import torch.distributed' alone   {torch_import * 1000:8.1f} ms  "
              f"(what the command paid when it used torch's client; exit status {warm.returncode})")
        spy = shutil.which("py-spy")
        if spy is None:
            print("py-spy dump per rank: skipped (py-spy is not installed: pip install py-spy)")
        else:
            spies, failed = [], None
            for _ in range(args.runs):
                started = time.perf_counter()
                for pid in workers:
                    spied = subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=60)
                    if spied.returncode != 0 or "Thread" not in spied.stdout:
                        failed = (spied.stderr or spied.stdout).strip().splitlines()[:1]
                spies.append(time.perf_counter() - started)
            if failed is not None:
                print(f"py-spy dump per rank: skipped (py-spy failed: {failed}; it needs ptrace rights)")
            else:
                print(_median_line(f"py-spy dump of {len(workers)} ranks, one after the other", spies))
        return 0
    finally:
        with contextlib.suppress(Exception):
            child.sendline("q")
            child.expect(pexpect.EOF, timeout=15)
        for pid in workers:  # torchrun starts each worker in a session of its own
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        if child.isalive():
            with contextlib.suppress(OSError):
                os.killpg(child.pid, signal.SIGKILL)
        child.close(force=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
