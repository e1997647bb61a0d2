"""``stop_job`` (Ctrl-Z at the console): the job stops before the call returns, and returns after SIGCONT.

The process under test runs in a process group of its own (as a shell with job control starts a job), with
a helper process in that group; the test is the shell: it sees the stop with ``waitpid`` and continues the
group as ``fg`` does.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

import pytest

from process_state import process_state

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(not os.path.isdir("/proc") or not hasattr(signal, "SIGTSTP"),
                                 reason="job control and /proc")]

JOB = """\
import subprocess, sys, threading
sys.path.insert(0, sys.argv[1])
from llmpdb.console.suspend import stop_job
helper = subprocess.Popen(["sleep", "60"])
print(helper.pid, flush=True)

def editor():  # the editor's thread; the main thread waits for it, as the debugger does
    stop_job()
    print("after", flush=True)

thread = threading.Thread(target=editor)
thread.start()
thread.join()
helper.kill()
"""


def _wait_stopped(pid: int, bound: float) -> int:
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        found, status = os.waitpid(pid, os.WNOHANG | os.WUNTRACED)
        if found:
            return status
        time.sleep(0.01)
    raise AssertionError("the job did not stop")


def test_stop_job_returns_only_after_the_stop_and_the_continue():
    job = subprocess.Popen([sys.executable, "-c", JOB, ROOT], stdout=subprocess.PIPE, text=True,
                           process_group=0)
    helper = None
    try:
        helper = int(job.stdout.readline())
        status = _wait_stopped(job.pid, 30)
        assert os.WIFSTOPPED(status) and os.WSTOPSIG(status) == signal.SIGTSTP
        assert process_state(helper, "T") == "T"  # the whole group stopped, as a terminal's Ctrl-Z stops it
        # nothing ran on after the stop: the editor draws only after `fg`
        assert not select.select([job.stdout], [], [], 0.2)[0]
        os.killpg(job.pid, signal.SIGCONT)  # `fg`
        out, _ = job.communicate(timeout=30)
        assert out == "after\n" and job.returncode == 0
    finally:
        for pid in (job.pid, helper):
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        job.wait(timeout=10)


def test_in_an_orphaned_group_nothing_stops():
    """A launcher without job control: the kernel drops the stop and the editor goes on at once."""
    job = subprocess.run([sys.executable, "-c", JOB, ROOT], capture_output=True, text=True, timeout=30,
                         start_new_session=True)
    assert job.stdout.splitlines()[1:] == ["after"] and job.returncode == 0


def test_a_program_that_ignores_sigtstp_has_nothing_of_its_job_stopped():
    """``signal(SIGTSTP, SIG_IGN)`` (a program, or a launcher, that refuses to be stopped): the editor goes
    on at once, and no helper of the job is left stopped behind it."""
    ignoring = JOB.replace("print(helper.pid, flush=True)",  # the helper itself can be stopped
                           "print(helper.pid, flush=True)\nimport signal\nsignal.signal(signal.SIGTSTP, signal.SIG_IGN)")
    ignoring = ignoring.replace("helper.kill()", "sys.stdin.readline()\nhelper.kill()")  # the test looks first
    job = subprocess.Popen([sys.executable, "-c", ignoring, ROOT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           text=True, process_group=0)
    try:
        helper = int(job.stdout.readline())
        assert job.stdout.readline() == "after\n"
        assert process_state(helper, "T", bound=1.0) != "T"  # never stopped: it still sleeps
        job.stdin.write("\n")
        job.stdin.close()
        assert job.wait(timeout=30) == 0
    finally:
        try:
            os.killpg(job.pid, signal.SIGKILL)  # the job and its helper, stopped or not
        except OSError:
            pass
        job.wait(timeout=10)
