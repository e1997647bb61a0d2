"""``python -m llmpdb ranks --job [RUN_ID]``: from another terminal, where every rank of a torchrun job is.

Usage::

    python -m llmpdb ranks --job                 # the one running job llmpdb knows on this host
    python -m llmpdb ranks --job 5ce0e3cb        # a job by (the start of) its torchrun run id
    python -m llmpdb ranks --job none:29500      # RUN_ID:PORT: static-rendezvous jobs all have run id none
    python -m llmpdb ranks --job --timeout 20    # wait longer for busy ranks

Prints each rank's state (``ranks``), then its main thread's ``stack-model`` and the ``shapes`` of its
innermost frame, without stopping the job, also while a rank is blocked inside a collective
(``llmpdb.ranks.dump``). A job registers itself when llmpdb first runs in it (under ``python -m llmpdb`` at
the start, with ``PYTHONBREAKPOINT=llmpdb.set_trace`` at its first stop): every rank writes
``<tmp>/llmpdb-jobs-<uid>/<run id>-<port>-<launcher pid>.json`` naming torchrun's store; two jobs on one
node are both listed (static-rendezvous jobs share run id ``none``), the launchers of one job once. The
command speaks to torchrun's store over plain sockets (``llmpdb.ranks.wire``: no torch import) and asks every
rank at once, in one wait for all the answers: about 0.2 s for a paused 4-rank job
(``bench/ranks_job_bench.py``). Exit status 0 when every rank answered,
1 when some did not, 2 when no job (or more than one) matches.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

from ..files.private_file import write_private_file
from .commands import describe_rank
from .dump import request_dumps
from .store import RankJob, torchrun_prefix
from .wire import WireStore

__all__ = ["register_job", "live_jobs", "main", "jobs_dir", "job_name"]


def jobs_dir() -> str:
    """Usage: ``jobs_dir()`` -> ``/tmp/llmpdb-jobs-<uid>``; where running jobs register."""
    return os.path.join(tempfile.gettempdir(), f"llmpdb-jobs-{os.getuid()}")


def register_job(world: int) -> str | None:
    """Write this torchrun job's entry (the store's address and prefix); None when not under torchrun."""
    env = os.environ
    run = env.get("TORCHELASTIC_RUN_ID")
    if not run or env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() != "true":
        return None
    entry = {"run": run, "host": env.get("MASTER_ADDR", ""), "port": int(env.get("MASTER_PORT", "0") or 0),
             "prefix": torchrun_prefix(), "world": world, "launcher_pid": os.getppid(), "since": time.time()}
    # keyed by run id, store port and launcher: static-rendezvous jobs all have run id "none"
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "_" for c in run[:64])
    path = os.path.join(jobs_dir(), f"{safe}-{entry['port']}-{entry['launcher_pid']}.json")
    try:
        os.makedirs(jobs_dir(), mode=0o700, exist_ok=True)
        write_private_file(path, json.dumps(entry))  # 0600, renamed into place, never through a link
    except OSError:  # PrivateFileError included
        return None
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def live_jobs() -> list[dict]:
    """Usage: ``live_jobs()``; the registered jobs whose launcher still runs, newest first."""
    jobs = []
    try:
        names = os.listdir(jobs_dir())
    except OSError:
        return []
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(jobs_dir(), name), encoding="utf-8") as handle:
                entry = json.load(handle)
        except (OSError, ValueError):
            continue
        if isinstance(entry, dict) and _alive(int(entry.get("launcher_pid", 0) or 0)):
            jobs.append(entry)
    unique: dict[tuple, dict] = {}  # two launchers of one job (--nnodes 2 on one host) share its store
    for entry in sorted(jobs, key=lambda entry: entry.get("since", 0), reverse=True):
        unique.setdefault((entry.get("host"), entry.get("port"), entry.get("prefix")), entry)
    return list(unique.values())


def job_name(entry: dict) -> str:
    """Usage: ``job_name(entry)`` -> ``"none:29500"``: the run id and the store's port, which tell apart
    static-rendezvous jobs (all run id ``none``); ``--job`` takes it, or the start of the run id."""
    return f"{entry.get('run', '')}:{entry.get('port', '')}"


def _matches(entry: dict, wanted: str) -> bool:
    return str(entry.get("run", "")).startswith(wanted) or job_name(entry) == wanted


def _connect(entry: dict, timeout: float) -> WireStore:
    """torchrun's store over plain sockets (``llmpdb.ranks.wire``): importing torch would cost about 2 s."""
    return WireStore(str(entry["host"]), int(entry["port"]), prefix=str(entry["prefix"]),
                     timeout=timeout)


USAGE = "usage: python -m llmpdb ranks --job [RUN_ID] [--timeout SECONDS]  (every rank's stack and shapes)"


def _parse(argv: list[str]):
    """(run id prefix, timeout), "help", or None for bad arguments."""
    wanted, timeout, words = None, 10.0, list(argv)
    try:
        while words:
            word = words.pop(0)
            if word in ("-h", "--help"):
                return "help"
            if word == "--job":
                wanted = words.pop(0) if words and not words[0].startswith("-") else ""
            elif word.startswith("--job="):
                wanted = word.split("=", 1)[1]
            elif word == "--timeout" and words:
                timeout = float(words.pop(0))
            elif word.startswith("--timeout="):
                timeout = float(word.split("=", 1)[1])
            else:
                return None
    except ValueError:
        return None
    return (wanted, timeout) if wanted is not None and timeout > 0 else None


def main(argv: list[str]) -> int:
    """Usage: ``main(["--job"])``; print every rank's stack and shapes; returns the exit status."""
    parsed = _parse(argv)
    if parsed is None:
        print(USAGE, file=sys.stderr)
        return 2
    if parsed == "help":
        print(USAGE)
        return 0
    wanted, timeout = parsed
    jobs = [entry for entry in live_jobs() if _matches(entry, wanted)]
    if len(jobs) != 1:
        if not jobs:
            print(f"llmpdb: no running torchrun job{' ' + wanted if wanted else ''} registered in {jobs_dir()} "
                  "(a job registers when llmpdb first runs in it)", file=sys.stderr)
        else:
            print("llmpdb: several jobs run; name one with --job RUN_ID or --job RUN_ID:PORT:", file=sys.stderr)
            for entry in jobs:
                print(f"  {job_name(entry)}  {entry['world']} ranks  store {entry['host']}:{entry['port']}  "
                      f"launcher pid {entry.get('launcher_pid')}", file=sys.stderr)
        return 2
    entry = jobs[0]
    try:
        store = _connect(entry, timeout)
        records = RankJob(store, -1, int(entry["world"]), 0, "cli").records()  # before the request: it may spend
        print(f"llmpdb: job {entry['run']}, {entry['world']} ranks, torchrun store {entry['host']}:{entry['port']}")
        answers = request_dumps(store, int(entry["world"]), timeout=timeout,
                                reconnect=lambda: _connect(entry, timeout))
    except OSError as exc:  # WireError included: one line, not a traceback
        print(f"llmpdb: job {job_name(entry)}: {exc} (torchrun ended?)", file=sys.stderr)
        return 2
    for rank, text in answers.items():
        record = records[rank]
        host = f" on {record.host}, pid {record.pid}" if record is not None else ""
        print(f"\n=== rank {rank}{host}: {describe_rank(record)}")
        print(text if text is not None else f"no answer within {timeout:g} s (its llmpdb watcher is not running: "
              "the rank has not run llmpdb yet, or it holds the GIL in C code)")
    return 0 if all(text is not None for text in answers.values()) else 1
