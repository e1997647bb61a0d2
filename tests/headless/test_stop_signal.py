"""SIGUSR1 (``install_attach_signal``: "stop at the next line") while the program is already stopped: at an
open prompt it used to break the session (``'NoneType' object has no attribute 'f_globals'``), during an
attach wait it "stopped" inside llmpdb's own ``accept_one``. Now it is ignored with one line. Real
``python -m llmpdb`` jobs, real signals; each has a timeout."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(TESTS)
pytestmark = pytest.mark.timeout(120)

SCRIPT = textwrap.dedent(
    """
    def work(n):
        total = n * 2
        breakpoint()
        return total
    print("result", work(21), flush=True)
    """
)


def start(tmp_path, **env):
    (tmp_path / "job.py").write_text(SCRIPT)
    run_dir = tempfile.mkdtemp(prefix="ls", dir="/tmp")
    os.chmod(run_dir, 0o700)
    full = {**os.environ, "PYTHONPATH": ROOT, "PYTHONBREAKPOINT": "llmpdb.set_trace", "NO_COLOR": "1",
            "XDG_RUNTIME_DIR": run_dir, **env}
    out, err = open(tmp_path / "out", "w"), open(tmp_path / "err", "w")
    proc = subprocess.Popen([sys.executable, "-m", "llmpdb", str(tmp_path / "job.py")], cwd=tmp_path, env=full,
                            stdin=subprocess.PIPE if "stdin" not in env else subprocess.DEVNULL,
                            stdout=out, stderr=err, text=True)
    out.close(), err.close()
    return proc


def wait_for(path, pattern, proc, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        text = path.read_text()
        if re.search(pattern, text):
            return text
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise AssertionError(f"no {pattern!r} in:\n{path.read_text()}")


def finish(proc, timeout=60):
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return "hung"


def test_sigusr1_at_an_open_prompt_is_ignored_and_the_session_goes_on(tmp_path):
    proc = start(tmp_path, LLMPDB_HEADLESS="log")
    try:
        proc.stdin.write("c\np total + 1000\n")  # past the first line, then one command at the breakpoint
        proc.stdin.flush()
        wait_for(tmp_path / "out", r"1042\n\(llmpdb\) ", proc)  # at the prompt, waiting for the next line
        proc.send_signal(signal.SIGUSR1)
        wait_for(tmp_path / "err", "SIGUSR1", proc)
        proc.stdin.write("p total + 2000\nc\n")
        proc.stdin.flush()
        status = finish(proc)
    finally:
        proc.stdin.close()
        if proc.poll() is None:
            proc.kill()
    out, err = (tmp_path / "out").read_text(), (tmp_path / "err").read_text()
    assert status == 0 and "2042\n" in out and "result 42" in out, (out, err)
    assert "f_globals" not in out + err and "Traceback" not in out + err, (out, err)
    assert err.count("llmpdb: SIGUSR1: already stopped") == 1, err


def test_sigusr1_during_an_attach_wait_never_stops_in_llmpdb(tmp_path):
    proc = start(tmp_path, LLMPDB_HEADLESS="attach", LLMPDB_ATTACH_TIMEOUT="3", stdin="null")
    try:
        wait_for(tmp_path / "err", "waiting 3 s for a client", proc)
        proc.send_signal(signal.SIGUSR1)
        status = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    out, err = (tmp_path / "out").read_text(), (tmp_path / "err").read_text()
    assert status == 0 and "result 42" in out, (out, err)
    assert "listener.py" not in err and "accept_one" not in err + out, err  # before: "stopping at ...accept_one()"
    assert err.count("llmpdb: SIGUSR1: already stopped") == 1, err
