"""`r`, `n`, `s` and `until` at the bottom of a program run by ``python -m llmpdb``: the stops stay in the
program, as pdb's do, and the program then ends; no stop in bdb's ``run``/``runcall`` or in llmpdb's frames
(pdb stops at ``<string>`` and in ``bdb.py`` there; llmpdb hides both), under both engines.

The debuggee is plain Python (no torch): these run on every supported Python version. Each session feeds
the keys through a pipe to a real ``python -m llmpdb`` subprocess, with a timeout."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MODULE_LEVEL = """\
def f(x):
    return x + 1

a = f(1)
b = f(a)
print("done", b)
"""

MAIN_FUNCTION = """\
def helper(x):
    return x * 2


def main():
    y = helper(3)
    print("y", y)
    return y


if __name__ == "__main__":
    main()
"""

_HEADER = re.compile(r"^(?:\(llmpdb\) )*(--Return--\n|--Call--\n)?(?:\[\s*\d+\] )?> (.*?)\((\d+)\)(\w+|<module>)\(\)", re.M)


def _session(tmp_path, source: str, keys: list[str], fast: bool) -> tuple[list[str], str]:
    script = tmp_path / "bottom.py"
    script.write_text(source)
    env = {**os.environ, "PYTHONPATH": ROOT, "NO_COLOR": "1", "LLMPDB_FAST_BREAKPOINTS": "1" if fast else "0",
           "PYTHONBREAKPOINT": "", "LLMPDB_TOUR": ""}
    proc = subprocess.run([sys.executable, "-m", "llmpdb", str(script)], input="\n".join(keys) + "\n",
                          capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=60)
    text = proc.stdout + proc.stderr
    stops = []
    for match in _HEADER.finditer(text):
        kind = "return " if match.group(1) and "Return" in match.group(1) else ""
        stops.append(f"{kind}{os.path.basename(match.group(2))}:{match.group(4)}:{match.group(3)}")
    return stops, text


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fast", [True, False], ids=["fast", "stock"])
@pytest.mark.parametrize("keys, expected", [
    (["r", "n", "n", "n"], ["bottom.py:<module>:1", "return bottom.py:<module>:6"]),
    (["n", "n", "n", "r", "n", "n"], ["bottom.py:<module>:1", "bottom.py:<module>:4", "bottom.py:<module>:5",
                                      "bottom.py:<module>:6", "return bottom.py:<module>:6"]),
    (["n", "n", "n", "s", "s", "s"], ["bottom.py:<module>:1", "bottom.py:<module>:4", "bottom.py:<module>:5",
                                      "bottom.py:<module>:6", "return bottom.py:<module>:6"]),
    (["n", "n", "n", "unt", "unt", "unt"], ["bottom.py:<module>:1", "bottom.py:<module>:4",
                                            "bottom.py:<module>:5", "bottom.py:<module>:6",
                                            "return bottom.py:<module>:6"]),
], ids=["return-then-next", "next-to-end-return", "step-at-last-line", "until-at-last-line"])
def test_module_level_steps_end_the_program_without_debugger_frames(tmp_path, fast, keys, expected):
    stops, text = _session(tmp_path, MODULE_LEVEL, keys, fast)
    assert stops == expected, text
    assert "llmpdb: the program finished" in text, text
    assert "bdb.py" not in text and "<string>" not in text and "Traceback" not in text, text


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fast", [True, False], ids=["fast", "stock"])
@pytest.mark.parametrize("last", ["n", "s", "unt", "r"])
def test_return_from_the_outermost_function_then_step_ends_the_program(tmp_path, fast, last):
    keys = ["b main", "c", "r", "n", last, last, last]
    stops, text = _session(tmp_path, MAIN_FUNCTION, keys, fast)
    assert stops == ["bottom.py:<module>:1", "bottom.py:main:6", "return bottom.py:main:8",
                     "return bottom.py:<module>:12"], text
    assert "llmpdb: the program finished" in text, text
    assert "bdb.py" not in text and "<string>" not in text and "Traceback" not in text, text
