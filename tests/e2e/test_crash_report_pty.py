"""``python -m llmpdb --report PATH`` at a terminal: the uncaught exception writes the report and ends the
program with status 1 instead of opening the post-mortem prompt."""

from __future__ import annotations

import pexpect

from ..headless.test_crash_report import SCRIPT
from .pty_session import PtySession


def test_report_at_a_terminal_writes_and_exits_without_a_prompt(tmp_path):
    script, report = tmp_path / "crash.py", tmp_path / "crash-report.txt"
    script.write_text(SCRIPT)
    with PtySession(["-m", "llmpdb", "--report", str(report), str(script)], env={"PYTHONBREAKPOINT": None},
                    timeout=90) as session:
        session.wait_prompt()  # the script's first line, as always at a terminal
        session.child.sendline("c")
        session.child.expect(pexpect.EOF)  # no post-mortem prompt: the run ends by itself
        tail = session.child.before.replace("\r", "")
        session.child.close()
        assert session.exitstatus == 1
    assert f"llmpdb: crash report written to {report}" in tail
    assert "post-mortem" not in tail
    text = report.read_text()
    assert "Linear.forward() · model.layers.1.mlp.down_proj (Linear)" in text
    assert "input  (1, 4, 128)  f32    2.0 KiB  batch · ? · intermediate" in text
