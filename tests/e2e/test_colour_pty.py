"""Colour in a real terminal (pexpect pty) on both bases, and none with NO_COLOR or into a pipe."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from llmpdb.render.style import Style

from .pty_session import PROMPT, ROOT, PtySession, _ESCAPES

pytestmark = pytest.mark.timeout(240)

SGR = re.compile(r"\x1b\[[0-9;]*m")
# A colour code: a foreground or background (30-49, 90-107; 38/48 with 256 or RGB). With colour off the line
# editor still writes attribute resets (0) and reverse video (7), which NO_COLOR allows.
COLOUR = re.compile(r"\x1b\[(?:[0-9]*;)*(?:3[0-9]|4[0-9]|9[0-7]|10[0-7])(?:;[0-9]*)*m")
FRAGMENT = re.compile(r"\[[0-9;]+m")  # what is left of an escape sequence that was coloured again
BANNER_START = "llmpdb: shapes · stack-model"
SCRIPT = """\
import torch
from torch import nn


def main():
    model = nn.Linear(4, 3)
    x = torch.ones(2, 4)
    y = model(x)
    breakpoint()
    return y


main()
"""


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "colour_target.py"
    path.write_text(SCRIPT)
    return str(path)


def _env(tmp_path, base: str, **extra) -> dict:
    env = {"NO_COLOR": None, "LLMPDB_COLOR": None, "TERM": "xterm", "LLMPDB_CONFIG": str(tmp_path / "none.toml"),
           "LLMPDB_BASE": "stdlib" if base == "stdlib" else None, **extra}
    return env


def _raw(session: PtySession, command: str) -> str:
    """What ``command`` printed, escape sequences kept, carriage returns dropped, echo line removed."""
    session.child.sendline(command)
    session.child.expect(PROMPT)
    text = session.child.before.replace("\r", "")
    return text.split("\n", 1)[1] if "\n" in text else ""


def _source_lines(text: str, needle: str) -> list[str]:
    return [line for line in text.splitlines() if needle in _ESCAPES.sub("", line)]


def _assert_coloured_once(lines: list[str]) -> None:
    assert lines
    for line in lines:
        assert SGR.search(line), repr(line)
        plain = _ESCAPES.sub("", line)
        assert "\x1b" not in plain and not FRAGMENT.search(plain), repr(line)  # never coloured twice


@pytest.mark.parametrize("base", ["stdlib", "pdb++"])
def test_listing_shapes_and_errors_coloured_on_a_terminal(base, script, tmp_path):
    with PtySession(["-m", "llmpdb", script], env=_env(tmp_path, base)) as s:
        s.wait_prompt()
        stop = _raw(s, "c")
        _assert_coloured_once(_source_lines(stop, "return y"))  # the stop's -> line
        _assert_coloured_once(_source_lines(_raw(s, "l"), "y = model(x)"))
        _assert_coloured_once(_source_lines(_raw(s, "ll"), "def main():"))
        table = _raw(s, "shapes")
        assert re.search(rf"\x1b\[{Style().code('dtype')}mf32\x1b\[0m", table), repr(table)
        assert f"\x1b[{Style().code('path')}mx\x1b[0m" in table
        error = _raw(s, "shapes nope")
        assert f"\x1b[{Style().code('error')}m*** shapes: cannot evaluate 'nope'" in error
        if base == "pdb++":  # sticky mode: pdb++'s own colours, once per line
            sticky = _raw(s, "sticky")
            lines = _source_lines(sticky, "y = model(x)") + _source_lines(sticky, "def main():")
            _assert_coloured_once(lines)
            for line in lines:
                assert not re.search(r"(\x1b\[[0-9;]*m)\1", line), repr(line)  # no code repeated back to back
            _raw(s, "sticky")
        s.finish("c")
    assert BANNER_START in s.transcript[0] + s.transcript[1]


@pytest.mark.parametrize("base", ["stdlib", "pdb++"])
def test_no_colour_with_no_color_and_banner_off(base, script, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text("banner = false\n")
    with PtySession(["-m", "llmpdb", script], env=_env(tmp_path, base, NO_COLOR="1",
                                                         LLMPDB_CONFIG=str(config))) as s:
        first = s.child.expect(PROMPT) == 0 and s.child.before
        out = [_raw(s, command) for command in ("c", "l", "shapes", "shapes nope")]
        s.finish("c")
    assert not COLOUR.search(first + "".join(out)), repr(out)
    assert "y = model(x)" in out[1] and "f32" in out[2] and "*** shapes" in out[3]
    assert BANNER_START not in first + out[0]


def test_colour_setting_never_in_a_terminal(script, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('color = "never"\n')
    with PtySession(["-m", "llmpdb", script], env=_env(tmp_path, "stdlib", LLMPDB_CONFIG=str(config))) as s:
        s.wait_prompt()
        out = [_raw(s, command) for command in ("c", "l", "shapes")]
        s.finish("c")
    assert not COLOUR.search("".join(out)) and "y = model(x)" in out[1]


@pytest.mark.parametrize("base", ["stdlib", "pdb++"])
def test_no_colour_into_a_pipe(base, script, tmp_path):
    env = {k: v for k, v in {**os.environ, **_env(tmp_path, base)}.items() if v is not None}
    env.update(LLMPDB_HEADLESS="log", LLMPDB_LOG=str(tmp_path / "log"))
    done = subprocess.run([sys.executable, "-m", "llmpdb", script], input="c\nl\nshapes\nshapes nope\nc\n",
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=180)
    assert "y = model(x)" in done.stdout and "f32" in done.stdout and "*** shapes" in done.stdout, done.stdout
    assert not SGR.search(done.stdout + done.stderr)
