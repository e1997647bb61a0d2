"""Ctrl-C typed during ``continue`` stops the program inside its loop, ten times out of ten, while a
breakpoint with a false condition is armed in that loop (pdb then spends most of its time evaluating
the condition, and the signal lands in the debugger's own code). On every engine: 3.11 guarded hooks
(the script's function and module code), the 3.11 trace fallback (a running module frame), pdb's own tracing
(``LLMPDB_FAST_BREAKPOINTS=0``) and, torch-free, ``sys.monitoring`` on 3.12 and 3.13."""

from __future__ import annotations

import os
import re
import sys
import time

import pytest

from .pty_session import ROOT, PtySession

pytestmark = pytest.mark.timeout(120)

ROUNDS = 10

MODULE_LOOP = """\
import time
i = 0
end = time.monotonic() + 90
print("looping", flush=True)
for i in range(10**9):
    total = i * 2
    if total == -1:
        print("never")
    if time.monotonic() > end:
        break
print("finished")
"""
MODULE_LINES = range(5, 11)  # the loop's lines
MODULE_BREAK = "b 6, i < 0"

FUNCTION_LOOP = """\
import time


def work(end):
    for i in range(10**9):
        total = i * 2
        if total == -1:
            print("never")
        if time.monotonic() > end:
            break
    return i


print("looping", flush=True)
print("finished", work(time.monotonic() + 90))
"""
FUNCTION_LINES = range(5, 11)
FUNCTION_BREAK = "b 6, i < 0"

UNGUARDED = "# torch.compile (named here, llmpdb does not guard this script: its running frame is traced)\n"

_STOP = re.compile(r"loop\.py\((\d+)\)(<module>|work)\(\)")


def _other_python(version: str) -> str | None:
    path = os.path.expanduser(f"~/.pyenv/versions/{version}/bin/python3")
    return path if os.path.exists(path) else None


CASES = [
    pytest.param(sys.executable, FUNCTION_LOOP, FUNCTION_BREAK, FUNCTION_LINES, "1", id="guards-function"),
    pytest.param(sys.executable, MODULE_LOOP, MODULE_BREAK, MODULE_LINES, "1", id="guards-module"),
    pytest.param(sys.executable, MODULE_LOOP + UNGUARDED, MODULE_BREAK, MODULE_LINES, "1", id="trace-running-module"),
    pytest.param(sys.executable, FUNCTION_LOOP, FUNCTION_BREAK, FUNCTION_LINES, "0", id="pdb-tracing"),
]
for _version in ("3.12.1", "3.13.0"):
    _python = _other_python(_version)
    marks = () if _python else (pytest.mark.skip(reason=f"no Python {_version} under pyenv"),)
    CASES += [pytest.param(_python or "python3", source, breakpoint, lines, "1", marks=marks,
                           id=f"monitoring-{_version}-{kind}")
              for kind, source, breakpoint, lines in (("function", FUNCTION_LOOP, FUNCTION_BREAK, FUNCTION_LINES),
                                                      ("module", MODULE_LOOP, MODULE_BREAK, MODULE_LINES))]


@pytest.mark.parametrize("python, source, breakpoint, loop_lines, fast", CASES)
def test_ctrl_c_during_continue_always_stops_in_the_loop(tmp_path, python, source, breakpoint, loop_lines, fast):
    script = tmp_path / "loop.py"
    script.write_text(source)
    env = {"PYTHONPATH": ROOT, "LLMPDB_FAST_BREAKPOINTS": fast}
    with PtySession(["-m", "llmpdb", str(script)], env=env, executable=python, timeout=20) as s:
        s.wait_prompt()
        assert "Breakpoint 1 at" in s.run(breakpoint)
        s.child.sendline("c")
        s.child.expect("looping")
        previous = -1
        for round_number in range(ROUNDS):
            time.sleep(0.5)  # the line editor has given the terminal back: ^C is a signal, not a key
            s.child.sendintr()
            stop = s.wait_prompt()
            assert "Program interrupted." in stop, f"round {round_number}: {stop!r}"
            match = _STOP.search(stop)
            assert match and int(match.group(1)) in loop_lines, f"round {round_number}: {stop!r}"
            now = int(s.run("p i").strip())
            assert now > previous, f"round {round_number}: the loop did not advance ({previous} -> {now})"
            previous = now
            if round_number < ROUNDS - 1:
                s.child.sendline("c")
        assert "llmpdb: quit" in s.finish("q")
