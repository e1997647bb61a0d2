"""The debugger core: hyphenated commands, help, error isolation, prompt, completion, headless EOF."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap

import pytest

from llmpdb.commands._command import CommandError, command
from llmpdb.debugger.core import Pdb
from transcript import debug_transcript


class ProbeCommands:
    @command
    def do_probe_cmd(self, arg):
        """probe-cmd [WORD]
        Echo WORD; `probe-cmd bad` raises a user error, `probe-cmd crash` an internal one."""
        if arg == "bad":
            raise CommandError("bad word")
        if arg == "crash":
            raise ZeroDivisionError("division by zero")
        self.message(f"probe got {arg!r} at width {self.out_width()}")


class ProbePdb(ProbeCommands, Pdb):
    pass


def _run_probe(commands: list[str]) -> str:
    stdin = io.StringIO("\n".join(commands) + "\n")
    stdout = io.StringIO()
    debugger = ProbePdb(stdin=stdin, stdout=stdout, nosigint=True, readrc=False, headless_tour=[], width=77,
                        color=False)

    def target():
        probe_cmd = "a local that shadows nothing"
        return len(probe_cmd)

    debugger.runcall(target)
    return stdout.getvalue()


def test_hyphenated_command_runs_with_its_argument():
    out = _run_probe(["probe-cmd hello world", "c"])
    assert "probe got 'hello world' at width 77" in out


def test_hyphenated_help_prints_usage_first():
    out = _run_probe(["help probe-cmd", "c"])
    assert "probe-cmd [WORD]\nEcho WORD;" in out


def test_help_lists_llmpdb_commands_hyphenated():
    out = _run_probe(["help", "c"])
    listing = out.split("llmpdb commands (help NAME: usage, options, example):", 1)[1]
    assert "probe-cmd           Echo WORD" in listing.splitlines()
    table = out.split("Documented commands", 1)[1].split("llmpdb commands", 1)[0]
    assert "probe_cmd" not in table


def test_command_error_is_one_line_and_session_continues():
    out = _run_probe(["probe-cmd bad", "probe-cmd crash", "probe-cmd after", "c"])
    lines = [line for line in out.splitlines() if "***" in line]
    assert lines[0].endswith("*** probe-cmd: bad word")
    assert "probe-cmd: internal error ZeroDivisionError: division by zero" in lines[1]
    assert "the program is unaffected" in lines[1]
    assert "probe got 'after'" in out
    assert "Traceback" not in out


def test_completion_offers_hyphenated_names():
    debugger = ProbePdb(stdin=io.StringIO(), stdout=io.StringIO(), readrc=False)
    debugger.curframe, debugger.curframe_locals = sys._getframe(), {}
    assert debugger.completenames("probe-", "probe-", 0, 6) == ["probe-cmd"]
    assert "probe-cmd" in debugger.completenames("pro", "pro", 0, 3)
    assert "probe_cmd" not in debugger.completenames("pro", "pro", 0, 3)
    assert debugger.completenames("probe-") == ["probe-cmd"]  # the prompt's completer gives the text alone


def test_prompt_shows_rank(monkeypatch):
    debugger = Pdb(stdin=io.StringIO(), stdout=io.StringIO(), readrc=False)
    monkeypatch.delenv("RANK", raising=False)
    assert debugger.prompt == "(llmpdb) "
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert debugger.prompt == "(llmpdb r1) "


def test_bad_expression_and_unknown_name_keep_the_prompt():
    def target():
        x = 1
        breakpoint()
        return x

    out = debug_transcript(target, ["c", "p x +", "nosuchname", "p x + 1", "c"])
    assert "SyntaxError" in out
    assert "NameError: name 'nosuchname' is not defined" in out
    assert "\n(llmpdb) 2\n" in out


def test_eval_in_frame_reports_one_line():
    debugger = Pdb(stdin=io.StringIO(), stdout=io.StringIO(), readrc=False)
    debugger.curframe = sys._getframe()
    debugger.curframe_locals = {"x": 3}
    assert debugger.eval_in_frame("x * 2") == 6
    with pytest.raises(CommandError, match="cannot evaluate 'y': NameError"):
        debugger.eval_in_frame("y")
    with pytest.raises(CommandError, match="invalid expression"):
        debugger.eval_in_frame("x +")


PROBE_SCRIPT = textwrap.dedent(
    """
    import io, sys
    from llmpdb.commands._command import command
    from llmpdb.debugger.core import Pdb
    from llmpdb.base import BASE_NAME

    class Probe:
        @command
        def do_probe_cmd(self, arg):
            '''probe-cmd WORD
            Echo.'''
            self.message("probe:" + arg)

    class P(Probe, Pdb):
        pass

    def target():
        stack = 1
        model = 2
        return stack - model

    out = io.StringIO()
    P(stdin=io.StringIO("probe-cmd x\\nhelp probe-cmd\\nc\\n"), stdout=out, readrc=False, color=False).runcall(target)
    print(BASE_NAME)
    print(out.getvalue())
    """
)


@pytest.mark.parametrize("base", ["pdb++", "pdb"])
def test_hyphen_parsing_on_both_bases_in_a_fresh_process(base, tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(PROBE_SCRIPT)
    env = dict(os.environ)
    if base == "pdb":
        env["LLMPDB_BASE"] = "stdlib"
    else:
        from llmpdb.base import BASE_FALLBACK_REASON, BASE_NAME

        if BASE_NAME != "pdb++":
            pytest.skip(f"pdb++ base unavailable here: {BASE_FALLBACK_REASON}")
        env.pop("LLMPDB_BASE", None)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == base
    assert "probe:x" in result.stdout
    assert "probe-cmd WORD\nEcho." in result.stdout
