"""Long lines and Ctrl-Z at the prompt, in a real terminal.

A 100 KB line typed (pasted without bracketed paste) at the console comes back within seconds (it took over
a minute: prompt_toolkit handled and redrew it key by key); a 5 KB line at the plain prompt works on both
bases (pdb++'s pyrepl redrew the whole line at every key and never came back). Ctrl-Z suspends the process
as a shell user expects, and ``fg`` gives a fresh prompt (it inserted a literal ``^Z``).
"""

from __future__ import annotations

import os
import shlex
import sys
import time

import pexpect
import pytest

from process_state import process_state

from .pty_session import ROOT, PtySession, clean

pytestmark = pytest.mark.timeout(180)

SMALL_SCRIPT = "x = 6\nimport llmpdb; llmpdb.set_trace()\nprint('finished', x)\n"
BASES = [pytest.param({}, id="pdbpp"), pytest.param({"LLMPDB_BASE": "stdlib"}, id="stdlib")]


def _script(tmp_path) -> str:
    path = tmp_path / "work.py"
    path.write_text(SMALL_SCRIPT)
    return str(path)


def _long_line_answers(s: PtySession, size: int, bound: float) -> float:
    """Type ``p len('aaa…')`` of ``size`` characters in one write; the seconds until its answer."""
    s.wait_prompt()
    started = time.monotonic()
    s.child.send("p len('" + "a" * size + "')\r")
    s.child.expect_exact(f"{size}\r\n", timeout=bound)  # the typed line holds no digit
    return time.monotonic() - started


def test_a_100_kb_line_at_the_console_answers_within_seconds(tmp_path):
    with PtySession([_script(tmp_path)], env={"PYTHONPATH": ROOT}, timeout=60) as s:
        assert _long_line_answers(s, 100_000, bound=20) < 20
        s.wait_prompt()
        assert s.run("p x * 7").strip() == "42"  # the console goes on as before
        assert "finished 6" in s.finish("c")


@pytest.mark.parametrize("base", BASES)
def test_a_5_kb_line_at_the_plain_prompt_answers(tmp_path, base):
    env = {"PYTHONPATH": ROOT, "LLMPDB_PROMPT": "plain", **base}
    with PtySession([_script(tmp_path)], env=env, timeout=60) as s:
        assert _long_line_answers(s, 5_000, bound=20) < 20
        s.wait_prompt()
        assert s.run("p x * 7").strip() == "42"
        assert "finished 6" in s.finish("c")


def test_ctrl_z_suspends_and_fg_gives_a_fresh_prompt(tmp_path):
    """Under a shell with job control (``set -m``): Ctrl-Z stops the job, the shell says so and runs
    ``fg``; the prompt comes back empty (no ``^Z`` in the next command) and the session goes on."""
    script = _script(tmp_path)
    shell = (f"set -m; {shlex.quote(sys.executable)} {shlex.quote(script)}; echo SHELL-SAW-$?; "
             "fg; echo JOB-ENDED-$?")
    with PtySession(["-c", shell], env={"PYTHONPATH": ROOT}, timeout=60, executable="/bin/bash") as s:
        s.wait_prompt()
        s.child.send("p 1")  # half a command, then Ctrl-Z
        s.child.expect_exact("p 1", timeout=30)
        s.child.send("\x1a")
        s.child.expect_exact("SHELL-SAW-148", timeout=30)  # 128 + SIGTSTP: the job was stopped
        s.wait_prompt()  # `fg`: the prompt is drawn again, with the half-typed line and no ^Z in it
        s.child.send("+1\r")
        text = s.wait_prompt()
        assert text.split("\n", 1)[1].strip() == "2", clean(text)
        assert s.run("p x * 7").strip() == "42"
        out = s.finish("c")
        assert "finished 6" in out and "JOB-ENDED-0" in out


GROUP_SCRIPT = """\
import subprocess
helper = subprocess.Popen(["sleep", "120"])
print("HELPER", helper.pid, flush=True)
x = 6
import llmpdb; llmpdb.set_trace()
helper.kill()
print("finished", x)
"""


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads process states from /proc")
def test_ctrl_z_stops_the_whole_job_and_fg_continues_it(tmp_path):
    """The job is the process group: a helper the program started (a data-loader worker, ``sleep``) is
    stopped with it, as a terminal's own Ctrl-Z would, and runs again after ``fg``."""
    script = tmp_path / "group.py"
    script.write_text(GROUP_SCRIPT)
    shell = (f"set -m; {shlex.quote(sys.executable)} {shlex.quote(str(script))}; echo SHELL-SAW-$?; "
             "read -r go; fg; echo JOB-ENDED-$?")  # the shell waits for a line before `fg`
    with PtySession(["-c", shell], env={"PYTHONPATH": ROOT}, timeout=60, executable="/bin/bash") as s:
        s.child.expect(r"HELPER (\d+)")
        helper = int(s.child.match.group(1))
        s.wait_prompt()
        assert process_state(helper, "S") == "S"
        s.child.send("\x1a")
        s.child.expect_exact("SHELL-SAW-148", timeout=30)
        assert process_state(helper, "T") == "T"  # stopped with the debugger's own process
        s.child.send("\r")  # the shell's `read`, then `fg`
        s.wait_prompt()
        assert process_state(helper, "S") == "S"  # `fg` continued the whole group
        assert s.run("p x * 7").strip() == "42"
        out = s.finish("c")
        assert "finished 6" in out and "JOB-ENDED-0" in out


def test_ctrl_z_without_job_control_inserts_nothing(tmp_path):
    """Where nothing can take the job back (an orphaned process group: a launcher without job control),
    the kernel drops the stop: Ctrl-Z does nothing and puts nothing into the line."""
    with PtySession([_script(tmp_path)], env={"PYTHONPATH": ROOT}, timeout=60) as s:
        s.wait_prompt()
        s.child.send("p x")
        s.child.expect_exact("p x", timeout=30)
        s.child.send("\x1a")
        s.child.send(" * 7\r")
        text = s.wait_prompt()
        if "\n" not in text:  # the editor drew the line again after the refused stop
            text = s.wait_prompt()
        assert "42" in text.split("\n", 1)[1], clean(text)
        assert "^Z" not in text and "\x1a" not in text
        assert "finished 6" in s.finish("c")
        assert s.exitstatus == 0


OWN_STREAMS_SCRIPT = """\
import llmpdb
x = 6
llmpdb.Pdb(stdin=open("/dev/tty"), stdout=open("/dev/tty", "w")).set_trace()
print("finished", x)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's canonical-mode line limit")
def test_a_line_the_terminal_cut_is_refused_in_one_line(tmp_path):
    """A debugger given the terminal as its own stdin reads lines the terminal edits itself (canonical
    mode), which keeps 4095 characters of a line: the cut line is not run (it ran what was left)."""
    script = tmp_path / "own.py"
    script.write_text(OWN_STREAMS_SCRIPT)
    with PtySession([str(script)], env={"PYTHONPATH": ROOT}, timeout=60) as s:
        s.wait_prompt()
        s.child.send("p len('" + "a" * 5000 + "')\r")
        text = s.wait_prompt()
        assert "*** the terminal cut this line at 4095 characters" in text
        assert "SyntaxError" not in text and "5000" not in text
        assert s.run("").strip() == ""  # the empty line repeats nothing
        assert s.run("p x * 7").strip() == "42"
        assert "finished 6" in s.finish("c")
