"""Two threads at one ``breakpoint()``: one stop at a time, the other thread waits and says so in one line;
each stop's commands see its own thread's frame. Headless (stdin at end, commands piped) and in a pty."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pexpect
import pytest

from .pty_session import PtySession

SCRIPT = textwrap.dedent(
    """
    import sys, threading, time
    def worker(n, delay):
        time.sleep(delay)
        value = n * 10
        breakpoint()
        return value
    delays = [float(d) for d in sys.argv[1:3]]
    threads = [threading.Thread(target=worker, args=(i, delays[i]), name=f"worker-{i}") for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print("all threads done")
    """
)
HEADER = re.compile(r"^\[\d+\] > .*threads\.py\(7\)worker\(\)\n-> return value$", re.M)


def _env(**extra) -> dict:
    env = {**os.environ, "NO_COLOR": "1", "PYTHONBREAKPOINT": "llmpdb.set_trace", **extra}
    return env


def _run(script, stdin_text, env, delays=("0", "0")):
    proc = subprocess.Popen([sys.executable, str(script), *delays], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        out, _ = proc.communicate(stdin_text, timeout=90)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail("two threads at one breakpoint hung:\n" + out)
    return proc.returncode, out


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "threads.py"
    path.write_text(SCRIPT)
    return path


def _one_wait_line(out: str) -> None:
    waits = re.findall(r"llmpdb: thread 'worker-(\d)' (?:waits: thread 'worker-(\d)' is stopped|"
                       r"waited while thread 'worker-(\d)' was stopped)", out)
    assert len(waits) == 1, out
    waiting, *others = waits[0]
    assert waiting in "01" and set(others) - {""} == {"10"[int(waiting)]}, out


@pytest.mark.parametrize("attempt", range(3))
def test_headless_stops_take_turns(script, attempt):
    # the first stop lasts a second, the second thread arrives 0.3 s in: it must wait
    tour = "p value;p __import__('time').sleep(1)"
    code, out = _run(script, "", _env(LLMPDB_TOUR=tour), delays=("0", "0.3"))
    assert code == 0, out
    assert "all threads done" in out
    assert "***" not in out and "f_globals" not in out, out
    assert len(HEADER.findall(out)) == 2, out  # both headers whole, neither cut by the other thread
    tours = re.findall(r"\(llmpdb tour\) p value\n(\d+)\n", out)
    assert re.search(r"llmpdb: thread 'worker-\d' waits: thread 'worker-\d' is stopped\n", out), out
    assert re.search(r"llmpdb: thread 'worker-\d' stops \(waited \d\.\d s\)\n", out), out
    assert sorted(tours) == ["0", "10"], out
    _one_wait_line(out)


@pytest.mark.parametrize("attempt", range(3))
def test_piped_commands_reach_each_threads_own_frame(script, attempt):
    commands = "p value, n\np __import__('time').sleep(1)\nc\np value, n\nc\n"
    code, out = _run(script, commands, _env(LLMPDB_TOUR=""), delays=("0", "0.3"))
    assert code == 0, out
    assert "***" not in out, out
    assert sorted(re.findall(r"\((\d+), (\d)\)", out)) == [("0", "0"), ("10", "1")], out
    _one_wait_line(out)


def test_in_a_terminal_the_second_thread_waits_for_the_first(script):
    with PtySession([str(script), "0", "1"], env={"PYTHONBREAKPOINT": "llmpdb.set_trace"},
                    timeout=60) as session:
        first = session.wait_prompt()
        assert len(HEADER.findall(first)) == 1, first
        session.child.expect("llmpdb: thread 'worker-1' waits: thread 'worker-0' is stopped")
        assert session.run("p value, n").strip().endswith("(0, 0)")
        second = session.run("c")
        assert "llmpdb: thread 'worker-1' stops (waited" in second, second
        assert len(HEADER.findall(second)) == 1, second
        assert session.run("p value, n").strip() == "(10, 1)"
        rest = session.finish("c")
        assert "all threads done" in rest
        assert "(llmpdb)" not in rest.split("\n", 1)[-1]  # no prompt after the echoed `c` line
        assert session.exitstatus == 0
