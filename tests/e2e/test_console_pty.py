"""The prompt_toolkit prompt in a real terminal: TAB completion, history across runs, the plain fallbacks,
Ctrl-C and Ctrl-D at the prompt. On the pdb++ base and the standard one (``LLMPDB_BASE=stdlib``)."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys

import pexpect
import pytest

from .pty_session import ROOT, PtySession, clean

pytestmark = pytest.mark.timeout(180)

MODEL_SCRIPT = """\
import sys
sys.path.append({tests!r})
import torch
from tiny_models import tiny_llama

model = tiny_llama()
ids = torch.tensor([[1, 2, 3]])
outputs = model(input_ids=ids)
inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
import llmpdb; llmpdb.set_trace()
print("finished")
"""
SMALL_SCRIPT = "x = 6\nimport llmpdb; llmpdb.set_trace()\nprint('finished', x)\n"
BASES = [pytest.param({}, id="pdbpp"), pytest.param({"LLMPDB_BASE": "stdlib"}, id="stdlib")]
PASTE_ON = "\x1b[?2004h"  # prompt_toolkit turns bracketed paste on at each prompt; readline here does not


def _env(extra: dict) -> dict:
    return {"PYTHONPATH": ROOT, **extra}


def _script(tmp_path, text: str) -> str:
    path = tmp_path / "work.py"
    path.write_text(text)
    return str(path)


def _complete(s: PtySession, typed: str, inserted: str) -> None:
    """Type ``typed`` and TAB; wait until the terminal shows ``inserted`` (the completion's new text)."""
    s.child.send(typed + "\t")
    s.child.expect_exact(inserted, timeout=30)


def _enter(s: PtySession) -> str:
    s.child.send("\r")
    text = s.wait_prompt()
    return text.split("\n", 1)[1] if "\n" in text else ""


@pytest.mark.parametrize("base", BASES)
def test_tab_completes_commands_attributes_keys_and_module_paths(tmp_path, base):
    script = _script(tmp_path, MODEL_SCRIPT.replace("{tests!r}", repr(os.path.join(ROOT, "tests"))))
    with PtySession([script], env=_env(base)) as s:
        s.wait_prompt()
        assert PASTE_ON not in s.child.before  # the first prompt is drawn before the editor loads ...
        _complete(s, "stack-m", "odel")
        assert PASTE_ON in s.child.before  # ... and prompt_toolkit reads the first key

        table = _enter(s)
        assert "module / code" in table and "work.py:" in table

        _complete(s, "shapes --st", "ats")
        s.child.send("\x15")  # Ctrl-U: the line is dropped, not run
        _complete(s, "p outputs.lo", "gits")
        s.child.send(".shape")
        assert _enter(s).strip() == "torch.Size([1, 3, 256])"

        _complete(s, "p inputs['inp", "ut_ids']")
        s.child.send(".shape")
        assert _enter(s).strip() == "torch.Size([1, 3])"

        _complete(s, "bm model.layers.1.se", "lf_attn")
        armed = _enter(s)
        assert "module breakpoint 1: model.layers.1.self_attn -> model.layers.1.self_attn" in armed

        s.child.send("for i in range(2):\r")  # a block: continuation lines until an empty one
        s.child.expect_exact("...", timeout=30)
        s.child.send("print(i * 10)\r\r")
        assert re.search(r"^0\n10$", s.wait_prompt(), re.M)
        rest = s.finish("c")
        assert "finished" in rest


def test_history_is_kept_across_runs_in_the_state_directory(tmp_path):
    state = tmp_path / "state"
    env = _env({"XDG_STATE_HOME": str(state)})
    script = _script(tmp_path, SMALL_SCRIPT)
    with PtySession([script], env=env) as s:
        s.wait_prompt()
        assert s.run("p x * 7").strip() == "42"
        assert s.run("p x + 1").strip() == "7"
        s.child.send("\x1b[A")  # Up: the last command
        s.child.expect_exact("p x + 1", timeout=30)
        assert _enter(s).strip() == "7"
        s.finish("c")
    history = state / "llmpdb" / "history"
    assert stat.S_IMODE(history.stat().st_mode) == 0o600
    assert stat.S_IMODE(history.parent.stat().st_mode) == 0o700
    with PtySession([script], env=env) as s:
        s.wait_prompt()
        s.child.send("\x1b[A\x1b[A\x1b[A")  # the first run's commands, newest first
        s.child.expect_exact("p x * 7", timeout=30)
        assert _enter(s).strip() == "42"
        s.finish("c")


@pytest.mark.parametrize("env", [{"TERM": "dumb"}, {"LLMPDB_PROMPT": "plain"}], ids=["term-dumb", "plain"])
def test_plain_reads_where_the_console_cannot_run(tmp_path, env):
    state = {"XDG_STATE_HOME": str(tmp_path / "state")}
    with PtySession([_script(tmp_path, SMALL_SCRIPT)], env=_env({**env, **state})) as s:
        s.wait_prompt()
        assert PASTE_ON not in s.child.before
        assert s.run("p x * 7").strip() == "42"
        assert PASTE_ON not in s.child.before
        assert "finished 6" in s.finish("c")
    assert not (tmp_path / "state").exists()  # the console never started: no history file


def test_stdin_a_pipe_reads_lines(tmp_path):
    script = _script(tmp_path, SMALL_SCRIPT)
    done = subprocess.run([sys.executable, script], input="p x * 7\nc\n", capture_output=True, text=True,
                          timeout=60, env={**os.environ, **_env({"TERM": "xterm"})}, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "42" in done.stdout and "finished 6" in done.stdout and PASTE_ON not in done.stdout


@pytest.mark.parametrize("base", BASES)
def test_ctrl_c_cancels_the_line_and_ctrl_d_quits_as_before(tmp_path, base):
    script = _script(tmp_path, SMALL_SCRIPT)
    statuses = []
    for prompt in ("", "plain"):
        with PtySession(["-m", "llmpdb", script], env=_env({**base, "LLMPDB_PROMPT": prompt})) as s:
            s.wait_prompt()
            s.run("c")
            s.child.send("p 1 + ")
            s.child.expect_exact("+", timeout=30)  # echoed (readline may echo character by character)
            s.child.send("\x03")
            after = s.wait_prompt()
            assert "--KeyboardInterrupt--" in after
            assert s.run("p x * 7").strip() == "42"
            s.child.send("\x04")
            s.child.expect(pexpect.EOF)
            tail = clean(s.child.before)
            s.child.close()
            statuses.append((s.child.exitstatus, "finished" in tail))
    assert statuses[0] == statuses[1]


@pytest.mark.parametrize("base", BASES)
def test_history_recalls_with_up_after_an_in_process_restart(tmp_path, base):
    script = _script(tmp_path, SMALL_SCRIPT)
    with PtySession(["-m", "llmpdb", script], env=_env(base)) as s:
        s.wait_prompt()
        assert s.run("p 12345").strip() == "12345"
        s.run("restart")
        s.child.send("\x1b[A")  # Up at the new first stop: the newest entry is the restart itself
        s.child.expect_exact("restart", timeout=30)
        s.child.send("\x1b[A")  # and before it the command typed before the restart
        s.child.expect_exact("p 12345", timeout=30)
        assert _enter(s).strip() == "12345"
        s.child.sendline("q")
        s.child.expect(pexpect.EOF)


def test_a_command_typed_before_the_editor_loads_runs_once_and_each_prompt_is_drawn_once(tmp_path):
    """The first prompt is written before prompt_toolkit is imported (``llmpdb.console.deferred``): a line
    typed at once waits unechoed until the editor reads it, and ``(llmpdb) `` reaches the terminal once per
    read, so a script waiting for it never sees a prompt that is not ready."""
    with PtySession([_script(tmp_path, SMALL_SCRIPT)], env=_env({})) as s:
        s.child.expect_exact("(llmpdb) ")
        s.child.send("p x * 7\r")  # at once: the editor is still loading
        s.child.expect_exact("(llmpdb) ")
        raw = s.child.before  # from the first prompt to the second
        assert PASTE_ON in raw and "(llmpdb) " not in raw  # the editor drew the first prompt over itself
        echoed, *output = clean(raw).strip().splitlines()
        assert echoed.endswith("(llmpdb) p x * 7") and output == ["42"], clean(raw)
        assert "finished 6" in s.finish("c")
