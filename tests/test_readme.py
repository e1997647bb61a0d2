"""The README says exactly when ``breakpoint()`` opens llmpdb; check each way it names, and the one it does not.

Usage::

    python -m pytest tests/test_readme.py -q

Each run is a real subprocess with no terminal (stdin from /dev/null), so a stop runs the headless tour and
the program continues; the llmpdb prompt in the output tells whose debugger stopped.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = "x = 1\nbreakpoint()\nprint('finished', x)\n"


def _run(tmp_path: Path, argv: list[str], **env: str) -> subprocess.CompletedProcess:
    script = tmp_path / "bp.py"
    script.write_text(SCRIPT)
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONBREAKPOINT", "LLMPDB_DISABLE", "LLMPDB_TOUR")}
    clean.update(env, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, *[str(script) if a == "SCRIPT" else a for a in argv]], cwd=tmp_path,
                          env=clean, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)


def test_readme_names_the_ways_and_claims_no_more():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "sits behind every" not in readme
    for way in ("python -m llmpdb", "PYTHONBREAKPOINT=llmpdb.set_trace", "llmpdb.install()"):
        assert way in readme, way


@pytest.mark.timeout(90)
@pytest.mark.parametrize("argv, env", [
    (["-m", "llmpdb", "-c", "continue", "SCRIPT"], {}),
    (["SCRIPT"], {"PYTHONBREAKPOINT": "llmpdb.set_trace"}),
    (["-c", "import llmpdb, runpy; llmpdb.install(); runpy.run_path('bp.py')"], {}),
], ids=["python -m llmpdb", "PYTHONBREAKPOINT", "llmpdb.install()"])
def test_each_named_way_opens_llmpdb(tmp_path, argv, env):
    result = _run(tmp_path, argv, **env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "(llmpdb" in result.stdout, result.stdout[-2000:]
    assert "finished 1" in result.stdout


@pytest.mark.timeout(90)
def test_a_plain_run_does_not_open_llmpdb(tmp_path):
    result = _run(tmp_path, ["SCRIPT"])
    assert "(llmpdb" not in result.stdout + result.stderr
