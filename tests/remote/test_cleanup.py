"""A listener's ``.sock``/``.token`` files after SIGTERM/SIGHUP during an attach wait and after forked
children (DataLoader-style ``multiprocessing`` workers, ``os.fork``) stop at a breakpoint and exit. Real
jobs in subprocesses, real signals, real sockets; each run has a timeout."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(TESTS)
pytestmark = pytest.mark.timeout(120)

WAIT = textwrap.dedent(
    """
    import signal, sys
    if sys.argv[1:] == ["own-handler"]:
        signal.signal(signal.SIGTERM, lambda *a: sys.exit(7))
    def work():
        a = 1
        breakpoint()
        return a
    work()
    """
)


class Job:
    def __init__(self, tmp_path, source: str, *args: str, **env: str):
        self.run_dir = tempfile.mkdtemp(prefix="lc", dir="/tmp")  # short: Unix socket paths are limited
        os.chmod(self.run_dir, 0o700)
        (tmp_path / "job.py").write_text(source)
        self.err = tmp_path / "job.err"
        full = {**os.environ, "PYTHONPATH": ROOT, "PYTHONBREAKPOINT": "llmpdb.set_trace", "NO_COLOR": "1",
                "XDG_RUNTIME_DIR": self.run_dir, "LLMPDB_HEADLESS": "attach", **env}
        with open(self.err, "w") as err:
            self.proc = subprocess.Popen([sys.executable, str(tmp_path / "job.py"), *args], cwd=tmp_path, env=full,
                                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, text=True,
                                         start_new_session=True)  # its forked children are killed with it

    def files(self) -> list[str]:
        try:
            return sorted(os.listdir(os.path.join(self.run_dir, "llmpdb")))
        except FileNotFoundError:
            return []

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match:
        deadline = time.time() + timeout
        while time.time() < deadline:
            match = re.search(pattern, self.err.read_text())
            if match:
                return match
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"no {pattern!r} in:\n{self.err.read_text()}")

    def finish(self, timeout: float = 60) -> tuple[int, str]:
        out, _ = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the job and any child it forked (a pool worker)
        except OSError:
            pass
        self.proc.wait()


@pytest.fixture
def jobs():
    started: list[Job] = []
    yield started
    for job in started:
        job.kill()


@pytest.mark.parametrize("listen", ["unix", "tcp"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_during_the_wait_removes_the_files_and_still_kills(tmp_path, jobs, signum, listen):
    jobs.append(job := Job(tmp_path, WAIT, LLMPDB_LISTEN=listen, LLMPDB_ATTACH_TIMEOUT="60"))
    job.wait_for("waiting 60 s for a client")
    assert job.files() == [f"job-{job.proc.pid}." + ("sock" if listen == "unix" else "token")]
    job.proc.send_signal(signum)
    status, _ = job.finish()
    assert status == -signum  # the process still dies by the signal
    assert job.files() == []  # before: the socket / the token file (holding the token) stayed


def test_the_programs_own_handler_runs_and_the_files_go(tmp_path, jobs):
    jobs.append(job := Job(tmp_path, WAIT, "own-handler", LLMPDB_LISTEN="tcp", LLMPDB_ATTACH_TIMEOUT="60"))
    job.wait_for("waiting 60 s for a client")
    job.proc.send_signal(signal.SIGTERM)
    status, _ = job.finish()
    assert status == 7 and job.files() == []


WORKERS = textwrap.dedent(
    """
    import multiprocessing as mp, os, sys
    def stop_in_worker(i):
        x = i
        breakpoint()             # a forgotten breakpoint in a dataset's __getitem__
        return x
    def listing():
        return sorted(os.listdir(os.path.join(os.environ["XDG_RUNTIME_DIR"], "llmpdb")))
    breakpoint()                 # the parent's own stop: its listener stays open for later stops
    mine = listing()
    ctx = mp.get_context("fork")
    pool = ctx.Pool(2)
    print("results", pool.map(stop_in_worker, range(2)), flush=True)
    pool.close(); pool.join()    # the workers end as a DataLoader's do: told to, then os._exit
    proc = ctx.Process(target=stop_in_worker, args=(5,))
    proc.start(); proc.join()
    print("parent", os.getpid(), "before", mine, "after", listing(), flush=True)
    """
)


def test_forked_workers_that_stop_leave_no_files_and_keep_the_parents(tmp_path, jobs):
    jobs.append(job := Job(tmp_path, WORKERS, LLMPDB_LISTEN="tcp", LLMPDB_ATTACH_TIMEOUT="1"))
    status, out = job.finish(timeout=90)
    assert status == 0, job.err.read_text()
    match = re.search(r"parent (\d+) before (\[.*?\]) after (\[.*?\])", out)
    assert match, out
    own = [f"job-{match.group(1)}.token"]
    assert eval(match.group(2)) == own and eval(match.group(3)) == own, (out, job.err.read_text())
    assert job.err.read_text().count("waiting 1 s for a client") >= 2  # the workers did stop and wait
    assert job.files() == []  # before: one job-PID.token per worker, each holding its token


FORKED = textwrap.dedent(
    """
    import os, sys, time
    def work():
        a = 1
        breakpoint()
        return a
    work()                       # opens the listener (tcp), no client comes
    child = os.fork()
    if child == 0:               # a long-lived worker that never stops
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 1); os.dup2(null, 2)
        time.sleep(60)
        os._exit(0)
    print("child", child, flush=True)
    """
)


def test_a_forked_child_does_not_hold_the_parents_port(tmp_path, jobs):
    jobs.append(job := Job(tmp_path, FORKED, LLMPDB_LISTEN="tcp", LLMPDB_ATTACH_TIMEOUT="0.5"))
    port = int(job.wait_for(r"attach tcp:127\.0\.0\.1:(\d+)").group(1))
    status, out = job.finish()
    child = int(re.search(r"child (\d+)", out).group(1))
    try:
        assert status == 0 and job.files() == []
        with pytest.raises(ConnectionRefusedError):  # before: the child's copy still listened (a hang)
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
    finally:
        os.kill(child, signal.SIGKILL)
