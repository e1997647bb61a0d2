"""``debug f(1)`` at the prompt, in a pty, on the pdb++ and the standard base: a recursive llmpdb whose
``shapes`` and ``stack-model`` work, then back to the outer prompt; the program finishes normally."""

from __future__ import annotations

import textwrap

import pytest

from .pty_session import PtySession, clean

SCRIPT = textwrap.dedent(
    """
    import torch
    def f(size):
        hidden = torch.zeros(size, 4)
        doubled = hidden * 2
        return doubled
    def with_breakpoint():
        inner = 3
        breakpoint()
        return inner
    outer = 7
    breakpoint()
    print("end", tuple(f(2).shape))
    """
)
INNER = "((llmpdb)) "


def _inner(session: PtySession, command: str) -> str:
    session.child.sendline(command)
    session.child.expect_exact(INNER)
    text = clean(session.child.before)
    return text.split("\n", 1)[1] if "\n" in text else ""


@pytest.mark.parametrize("base", ["pdb++", "stdlib"])
def test_debug_enters_a_recursive_llmpdb_with_its_commands(tmp_path, base):
    script = tmp_path / "recursive.py"
    script.write_text(SCRIPT)
    env = {"LLMPDB_BASE": "stdlib" if base == "stdlib" else None, "PYTHONBREAKPOINT": None}
    with PtySession(["-m", "llmpdb", str(script)], env=env, timeout=60) as session:
        session.wait_prompt()
        session.run("c")
        session.child.sendline("debug f(1)")
        session.child.expect_exact(INNER)
        assert "ENTERING RECURSIVE DEBUGGER" in clean(session.child.before)
        assert "f()" in _inner(session, "step")
        _inner(session, "next")
        _inner(session, "next")
        shapes = _inner(session, "shapes")
        assert "hidden" in shapes and "(1, 4)" in shapes, shapes
        assert "f()" in _inner(session, "sm")
        assert "internal error" not in shapes and "Traceback" not in shapes
        back = session.run("c")
        assert "LEAVING RECURSIVE DEBUGGER" in back, back
        assert "_pdbpp_prompt" not in back and "Traceback" not in back, back
        assert session.run("p outer").strip() == "7"  # the outer stop is intact
        assert session.run("shapes").strip() == "no tensors in this frame's locals"
        rest = session.finish("c")
        assert "end (2, 4)" in rest
        assert session.exitstatus == 0
    assert not session.child.isalive()


def test_debug_of_code_that_exits_is_one_line(tmp_path):
    script = tmp_path / "recursive.py"
    script.write_text(SCRIPT)
    with PtySession(["-m", "llmpdb", str(script)], env={"PYTHONBREAKPOINT": None}, timeout=60) as session:
        session.wait_prompt()
        session.run("c")
        session.child.sendline("debug exit(4)")
        session.child.expect_exact(INNER)
        session.child.sendline("c")
        session.wait_prompt()
        text = clean(session.child.before)
        assert "*** SystemExit: 4" in text and "LEAVING RECURSIVE DEBUGGER" in text, text
        assert session.run("p outer").strip() == "7"
        assert "end (2, 4)" in session.finish("c")
        assert session.exitstatus == 0
    assert not session.child.isalive()


@pytest.mark.parametrize("base", ["pdb++", "stdlib"])
def test_a_breakpoint_inside_debugged_code_stops_in_the_recursive_debugger(tmp_path, base):
    script = tmp_path / "recursive.py"
    script.write_text(SCRIPT)
    env = {"LLMPDB_BASE": "stdlib" if base == "stdlib" else None, "PYTHONBREAKPOINT": "llmpdb.set_trace"}
    with PtySession([str(script)], env=env, timeout=60) as session:
        session.wait_prompt()
        session.child.sendline("debug with_breakpoint()")
        session.child.expect_exact(INNER)
        stop = _inner(session, "c")
        assert "with_breakpoint()" in stop, stop
        assert _inner(session, "p inner").strip() == "3"
        back = session.run("c")
        assert "LEAVING RECURSIVE DEBUGGER" in back and "***" not in back, back
        assert session.run("p outer").strip() == "7"  # the outer stop was not overwritten
        assert "end (2, 4)" in session.finish("c")
        assert session.exitstatus == 0
