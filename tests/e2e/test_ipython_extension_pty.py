"""``%load_ext llmpdb`` in IPython, in a real pty: ``%debug`` and ``%pdb on`` open llmpdb in the frame that
raised, with llmpdb's commands; ``llmpdb.pm()`` like ``pdb.pm()``; ``%unload_ext llmpdb`` gives IPython's
own debugger back. The child runs as a user's environment does (``user_env.py``: no pdb++ hijack)."""

from __future__ import annotations

import re

import pexpect
import pytest

from .pty_session import PtySession
from .user_env import user_python

IN_PROMPT = re.compile(r"In \[\d+\]: ")
BASES = pytest.mark.parametrize("base_env", [{}, {"LLMPDB_BASE": "stdlib"}], ids=["default-base", "stdlib-pdb"])
ARGS = ["-m", "IPython", "--quick", "--no-banner", "--colors=nocolor", "--simple-prompt",
        "--HistoryManager.enabled=False", "--TerminalInteractiveShell.autoindent=False"]


def _cell(child, line: str) -> str:
    child.sendline(line)
    child.expect(IN_PROMPT)
    return child.before


def _in_llmpdb(s: PtySession) -> None:
    header = s.wait_prompt()
    assert "widen()" in header, header
    shapes = s.run("shapes")
    assert re.search(r"hidden\s+\(2, 4\)\s+f32", shapes), shapes
    s.child.sendline("q")
    s.child.expect(IN_PROMPT)


@BASES
@pytest.mark.timeout(150)
def test_load_ext_makes_debug_and_pdb_on_open_llmpdb(base_env, tmp_path):
    pytest.importorskip("IPython", reason="IPython is not installed for this Python")
    args, env = user_python(ARGS, {"IPYTHONDIR": str(tmp_path), **base_env})
    with PtySession(args, env=env, timeout=60) as s:
        child = s.child
        child.expect(IN_PROMPT)
        _cell(child, "%load_ext llmpdb")
        _cell(child, "import torch, llmpdb")
        _cell(child, "def widen(t): hidden = t * 2; return hidden.view(3, 3)")
        assert "RuntimeError" in _cell(child, "widen(torch.ones(2, 4))")
        child.sendline("%debug")
        _in_llmpdb(s)
        _cell(child, "%pdb on")
        child.sendline("widen(torch.ones(2, 4))")
        _in_llmpdb(s)
        _cell(child, "%pdb off")
        child.sendline("llmpdb.pm()")
        _in_llmpdb(s)
        _cell(child, "%unload_ext llmpdb")
        child.sendline("%debug")
        child.expect(r"ipdb>")
        child.sendline("q")
        child.expect(IN_PROMPT)
        assert "still 42" in _cell(child, "print('still', 6 * 7)")
        child.sendline("exit")
        child.expect(pexpect.EOF)


@pytest.mark.timeout(60)
def test_pm_without_a_failure_says_so_in_one_line():
    import subprocess
    import sys

    from .pty_session import ROOT

    done = subprocess.run([sys.executable, "-c", "import llmpdb\ntry:\n    llmpdb.pm()\nexcept ValueError as e:\n"
                           "    print('said:', e)"], cwd=ROOT, env={"PYTHONPATH": ROOT, "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=50)
    assert done.stdout.startswith("said: pm() needs an uncaught exception first"), done.stdout + done.stderr
