"""Importing the `explain` command (what the debugger does at start-up) loads none of its inspection or
rendering modules: they are imported by the first `explain`. Checked in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_importing_the_command_loads_no_explain_machinery():
    code = ("import sys, llmpdb.commands.explain; "
            "print(sorted(m for m in sys.modules if m in ('llmpdb.inspect.explain', 'llmpdb.render.explain', "
            "'llmpdb.inspect.layer_calls', 'llmpdb.inspect.lookups')))")
    env = {**os.environ, "PYTHONPATH": ROOT}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
