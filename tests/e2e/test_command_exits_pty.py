"""An llmpdb command whose expression raises ``SystemExit`` (argparse's ``parse_args(['--bad'])``) or
``KeyboardInterrupt`` prints one ``***`` line and the stop goes on; the program then ends with its own
status (not 130: CPython marks a KeyboardInterrupt raised inside ``eval`` of a string as unhandled)."""

from __future__ import annotations

import textwrap

import pytest

from .pty_session import PtySession

SCRIPT = textwrap.dedent(
    """
    import argparse
    import torch
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float)
    def interrupt():
        raise KeyboardInterrupt
    model = torch.nn.Linear(2, 2)
    breakpoint()
    print("program end", parser.parse_args([]).lr)
    """
)
COMMANDS = {
    "shapes": "shapes {}",
    "kv": "kv {}",
    "root-model": "root-model {}",
    "statediff": "statediff snap s {}",
}


@pytest.mark.parametrize("base", ["pdb++", "stdlib"])
def test_exits_and_interrupts_in_command_expressions_are_one_line(tmp_path, base):
    script = tmp_path / "exits.py"
    script.write_text(SCRIPT)
    env = {"LLMPDB_BASE": "stdlib" if base == "stdlib" else None, "PYTHONBREAKPOINT": None}
    with PtySession(["-m", "llmpdb", "-c", "c", str(script)], env=env, timeout=90) as session:
        session.wait_prompt()
        assert session.run("p 6 * 7").strip() == "42"
        for name, template in COMMANDS.items():
            out = session.run(template.format("parser.parse_args(['--bad'])"))
            assert f"*** {name}: the expression raised SystemExit: 2 (the program goes on)" in out, out
            out = session.run(template.format("interrupt()"))
            assert out.strip() == f"*** {name}: interrupted", out
        assert session.run("p interrupt()").strip() == "*** KeyboardInterrupt"  # pdb's own command
        rest = session.finish("c")
        assert "program end None" in rest
        assert "llmpdb: the program finished" in rest
        assert session.exitstatus == 0 and session.child.signalstatus is None
