"""IPython in a real pty: after a cell fails, ``llmpdb.post_mortem()`` in the next cell opens llmpdb in the
frame that raised (as ``%debug`` opens pdb), with llmpdb's commands; ``q`` returns to IPython."""

from __future__ import annotations

import re
import sys

import pexpect
import pytest

from .pty_session import ROOT, PtySession

IN_PROMPT = re.compile(r"In \[\d+\]: ")


@pytest.mark.timeout(120)
def test_post_mortem_in_the_cell_after_a_failure_opens_llmpdb_in_the_raising_frame(tmp_path):
    pytest.importorskip("IPython", reason="IPython is not installed for this Python")
    args = ["-m", "IPython", "--quick", "--no-banner", "--colors=NoColor", "--simple-prompt",
            "--HistoryManager.enabled=False", "--TerminalInteractiveShell.autoindent=False"]
    with PtySession(args, env={"PYTHONPATH": ROOT, "IPYTHONDIR": str(tmp_path)}, timeout=60) as session:
        child = session.child
        child.expect(IN_PROMPT)
        child.sendline("import torch, llmpdb")
        child.expect(IN_PROMPT)
        child.sendline("def widen(t): hidden = t * 2; return hidden.view(3, 3)")
        child.expect(IN_PROMPT)
        child.sendline("widen(torch.ones(2, 4))")
        child.expect(IN_PROMPT)
        assert "RuntimeError" in child.before
        child.sendline("llmpdb.post_mortem()")
        header = session.wait_prompt()
        assert "widen()" in header, header
        shapes = session.run("shapes")
        assert re.search(r"hidden\s+\(2, 4\)\s+f32", shapes), shapes
        assert re.search(r"^t\s+\(2, 4\)\s+f32", shapes, re.M), shapes
        child.sendline("q")
        child.expect(IN_PROMPT)
        child.sendline("print('still', 6 * 7)")
        child.expect(IN_PROMPT)
        assert "still 42" in child.before
        child.sendline("exit")
        child.expect(pexpect.EOF)
