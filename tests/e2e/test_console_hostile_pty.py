"""A hostile history path in a real terminal: a FIFO planted there never blocks the prompt."""

from __future__ import annotations

import os

import pytest

from .pty_session import ROOT, PtySession

pytestmark = pytest.mark.timeout(120)


def test_fifo_at_the_history_path_still_prompts(tmp_path):
    state = tmp_path / "state"
    (state / "llmpdb").mkdir(parents=True, mode=0o700)
    os.mkfifo(state / "llmpdb" / "history")
    script = tmp_path / "work.py"
    script.write_text("x = 6\nprint('finished', x)\n")
    env = {"PYTHONPATH": ROOT, "XDG_STATE_HOME": str(state)}
    with PtySession(["-m", "llmpdb", str(script)], env=env, timeout=40) as s:
        first = s.wait_prompt()
        assert "*** history:" in first
        assert s.run("p 1+1").strip() == "2"
        assert "finished 6" in s.finish("c")
        assert s.exitstatus == 0
