"""A standard input that is an open pipe nobody writes to (``ssh host 'python job.py'`` without ``-t``,
``docker run -i``, ``Popen(stdin=PIPE)``): every ``breakpoint()`` used to block forever. Now the first stop
waits ``LLMPDB_ATTACH_TIMEOUT`` for a command, then goes to the headless policy; a pipe that does deliver
commands is read exactly as before. Real subprocesses with real pipes, kept open; each has a timeout."""

from __future__ import annotations

import os
import subprocess
import sys
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
    print("results", [work(n) for n in range(3)], flush=True)
    """
)


def start(tmp_path, module: bool, **env):
    (tmp_path / "job.py").write_text(SCRIPT)
    full = {**os.environ, "PYTHONPATH": ROOT, "PYTHONBREAKPOINT": "llmpdb.set_trace", "NO_COLOR": "1",
            "LLMPDB_HEADLESS": "log", "LLMPDB_ATTACH_TIMEOUT": "1", **env}
    out, err = open(tmp_path / "out", "w"), open(tmp_path / "err", "w")
    argv = [sys.executable, *(["-m", "llmpdb"] if module else []), str(tmp_path / "job.py")]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=full, stdin=subprocess.PIPE, stdout=out, stderr=err, text=True)
    out.close(), err.close()
    return proc


def finish(proc, tmp_path, timeout=40):
    try:
        status = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        status = "hung"
    finally:
        proc.stdin.close()
    return status, (tmp_path / "out").read_text(), (tmp_path / "err").read_text()


@pytest.mark.parametrize("module", [False, True])
def test_a_pipe_nobody_writes_to_falls_back_to_the_policy(tmp_path, module):
    began = time.time()
    proc = start(tmp_path, module)  # stdin stays open and empty until the job ends
    status, out, err = finish(proc, tmp_path)
    assert status == 0, (status, out, err)  # before: blocked at the first stop until killed
    assert "results [0, 2, 4]" in out and out.count("llmpdb log") == 3, out
    assert err.count("nothing came on standard input within 1 s") == 1, err
    assert time.time() - began < 30


def test_a_pipe_that_delivers_commands_is_read_as_before(tmp_path):
    proc = start(tmp_path, module=False)
    proc.stdin.write("p total + 100\nc\np total + 200\nc\np total + 400\nc\n")  # every stop's commands
    proc.stdin.flush()
    time.sleep(3)  # the pipe stays open past the attach timeout: what it delivered is still read, in order
    status, out, err = finish(proc, tmp_path)
    assert status == 0, (out, err)
    assert "100\n" in out and "202\n" in out and "404\n" in out and "results [0, 2, 4]" in out, out
    assert "llmpdb log" not in out and "standard input" not in err, (out, err)


def test_commands_that_come_late_but_within_the_timeout_are_read(tmp_path):
    proc = start(tmp_path, module=True, LLMPDB_ATTACH_TIMEOUT="30")
    time.sleep(2)
    proc.stdin.write("c\np total + 100\nc\np total + 300\nc\np total + 500\nc\n")
    proc.stdin.flush()
    status, out, err = finish(proc, tmp_path)
    assert status == 0, (out, err)
    assert "100\n" in out and "302\n" in out and "504\n" in out and "llmpdb log" not in out, out
