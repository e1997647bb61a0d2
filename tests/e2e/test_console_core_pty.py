"""The prompt_toolkit prompt without torch, so the core runs on Python 3.12 and 3.13 (the standard base there)
drive it too: TAB on a hyphenated command, on ``help``'s argument and on an attribute; Up after an in-process
``restart``; no colour code with ``NO_COLOR``. On the pdb++ base and the standard one."""

from __future__ import annotations

import os
import re

import pexpect
import pytest

from .pty_session import ROOT, PtySession

pytestmark = pytest.mark.timeout(120)

SCRIPT = """\
class Box:
    alpha_value = 1

    @property
    def beta_value(self):
        raise RuntimeError("the debugger ran a property")


box = Box()
box.gamma_value = 3
import llmpdb; llmpdb.set_trace()
print("finished", box.gamma_value)
"""
BASES = [pytest.param({}, id="pdbpp"), pytest.param({"LLMPDB_BASE": "stdlib"}, id="stdlib")]
PASTE_ON = "\x1b[?2004h"  # prompt_toolkit turns bracketed paste on at each prompt; readline does not
COLOUR = re.compile(r"\x1b\[(?:[0-9]*;)*(?:3[0-9]|4[0-9]|9[0-7]|10[0-7])(?:;[0-9]*)*m")


def _session(tmp_path, base: dict, **env) -> PtySession:
    script = tmp_path / "box.py"
    script.write_text(SCRIPT)
    return PtySession([str(script)], env={"PYTHONPATH": ROOT, **base, **env}, timeout=40)


def _complete(s: PtySession, typed: str, inserted: str) -> None:
    s.child.send(typed + "\t")
    s.child.expect_exact(inserted, timeout=20)


def _enter(s: PtySession) -> str:
    s.child.send("\r")
    text = s.wait_prompt()
    return text.split("\n", 1)[1] if "\n" in text else ""


@pytest.mark.parametrize("base", BASES)
def test_tab_completion_and_history_after_restart(tmp_path, base):
    with _session(tmp_path, base) as s:
        s.wait_prompt()
        assert PASTE_ON not in s.child.before  # the first prompt is drawn before the editor loads ...
        _complete(s, "help stack-", "model")
        assert PASTE_ON in s.child.before  # ... and prompt_toolkit reads the first key
        assert "stack-model" in _enter(s)
        _complete(s, "p box.gam", "ma_value")
        assert _enter(s).strip() == "3"
        _complete(s, "p box.alp", "ha_value")
        assert _enter(s).strip() == "1"
        assert s.run("p 12345+1").strip() == "12346"
        s.run("restart")
        s.child.send("\x1b[A")  # Up: the newest entry is the restart itself
        s.child.expect_exact("restart", timeout=20)
        s.child.send("\x1b[A")  # then the command before it
        s.child.expect_exact("p 12345+1", timeout=20)
        assert _enter(s).strip() == "12346"
        assert "finished 3" in s.finish("c")
    assert "the debugger ran a property" not in "".join(s.transcript)


@pytest.mark.parametrize("base", BASES)
def test_no_colour_code_with_no_color(tmp_path, base):
    with _session(tmp_path, base, NO_COLOR="1") as s:
        s.child.expect(r"\(llmpdb\) ")
        raw = [s.child.before]
        for command in ("l", "p box.gamma_value", "nope_name"):
            s.child.sendline(command)
            s.child.expect(r"\(llmpdb\) ")
            raw.append(s.child.before)
        s.finish("c")
    text = "".join(raw)
    assert PASTE_ON in text and "NameError" in text
    assert not COLOUR.search(text), repr(text)


INPUT_SCRIPT = "import llmpdb; llmpdb.set_trace()\nname = input('name? ')\nprint('hello', name)\n"


def _tiocsti_allowed() -> bool:
    try:
        with open("/proc/sys/dev/tty/legacy_tiocsti") as flag:
            return flag.read().strip() != "0"
    except OSError:
        return os.uname().sysname == "Linux"


@pytest.mark.skipif(not _tiocsti_allowed(), reason="the kernel refuses TIOCSTI (dev.tty.legacy_tiocsti = 0)")
@pytest.mark.parametrize("base", BASES)
def test_keys_typed_ahead_reach_the_program_and_the_next_prompts(tmp_path, base):
    script = tmp_path / "ask.py"
    script.write_text(INPUT_SCRIPT)
    with PtySession([str(script)], env={"PYTHONPATH": ROOT, **base}, timeout=40) as s:
        s.wait_prompt()
        s.child.send("p 111\rp 222\r")  # two commands in one write: both run
        s.child.expect_exact("222\r\n", timeout=20)
        assert "111" in s.child.before
        s.wait_prompt()
        s.child.send("c\rbob\r")  # `c` and the program's answer in one write: the answer reaches input()
        s.child.expect_exact("hello bob", timeout=20)
        s.child.expect(pexpect.EOF)
