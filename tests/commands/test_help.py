"""``help``: llmpdb's commands in their own group with a summary each; ``help NAME`` with an example;
the first-stop banner on a terminal only. Both debugger bases."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from llmpdb.commands.help import BANNER, help_entries, summary_of
from llmpdb.debugger.core import Pdb
from transcript import debug_transcript

from e2e.pty_session import ROOT, PtySession

GROUP = "llmpdb commands (help NAME: usage, options, example):"
BASES = pytest.mark.parametrize("base_env", [{}, {"LLMPDB_BASE": "stdlib"}], ids=["pdb++", "stdlib-pdb"])


def _group_rows(out: str) -> dict[str, str]:
    """The llmpdb group of ``help``: label -> summary (split at the column's double space)."""
    lines = out.split(GROUP, 1)[1].split("(llmpdb)", 1)[0].strip().splitlines()[1:]  # skip the ===== line
    rows = {}
    for line in lines:
        label, _, summary = line.partition("  ")
        rows[label.strip()] = summary.strip()
    return rows


def test_help_lists_llmpdb_commands_in_their_own_group_with_summaries():
    out = debug_transcript(lambda: None, ["help", "c"])
    rows = _group_rows(out)
    assert rows["stack-model (sm)"] == "The stack as the model sees it"
    assert rows["shapes"] == "Every tensor in the current frame's locals, or inside EXPR"
    assert rows["kv"] == "The KV cache in reach of this frame"
    assert rows["root-model"] == "Show or set the root model"
    assert {"break-module (bm)", "where-forward (wf)", "clear-module", "statediff", "model"} <= set(rows)
    table = out.split("Documented commands", 1)[1].split(GROUP, 1)[0]
    for name in ("shapes", "kv", "sm", "bm", "wf", "statediff", "stack_model"):
        assert f" {name} " not in f" {' '.join(table.split())} ", name  # only in llmpdb's group


def test_help_rows_fit_the_width():
    out = debug_transcript(lambda: None, ["help", "c"], width=60)
    lines = out.split(GROUP, 1)[1].split("(llmpdb)", 1)[0].strip().splitlines()
    assert all(len(line) <= 60 for line in lines)
    assert any(line.endswith("…") for line in lines)  # break-module's summary is cut, not wrapped


def test_every_command_has_usage_summary_and_example():
    for entry in help_entries(Pdb):
        method = getattr(Pdb, "do_" + entry.name.replace("-", "_"))
        assert entry.usage.startswith(entry.name), entry
        assert entry.summary and len(entry.summary) < 80, entry
        assert "\nExample: " + entry.name.split("-")[0][:1] in "\n" + "\n".join(
            line.strip() for line in (method.__doc__ or "").splitlines()), entry.name


def test_help_command_gives_usage_options_and_example():
    out = debug_transcript(lambda: None, ["help sm", "help break-module", "c"])
    assert "stack-model [--all]\n" in out
    assert "--all   also show the plumbing frames" in out
    assert "Example: stack-model --all\n" in out
    assert "  --once        remove the breakpoint after its first stop" in out
    assert "Example: bm layers.*.self_attn if hidden_states.shape[1] > 1 --once\n" in out


def test_summary_stops_at_the_first_sentence_or_colon():
    assert summary_of("x [A]\nDo one thing. Then more.") == "Do one thing"
    assert summary_of("x\nThe cache: one line") == "The cache"
    assert summary_of("x\nRemove N; hooks go") == "Remove N"
    assert summary_of("x [A]") == ""


SCRIPT = textwrap.dedent("""
    def main():
        value = 1
        breakpoint()
        return value

    main()
    print("script done")
""")


@BASES
def test_help_on_both_bases_and_no_banner_through_a_pipe(base_env, tmp_path):
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": ROOT, "PYTHONBREAKPOINT": "llmpdb.set_trace", "NO_COLOR": "1",
           "COLUMNS": "100", **base_env}
    result = subprocess.run([sys.executable, str(script)], input="help\nhelp kv\nc\n", env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert _group_rows(result.stdout)["stack-model (sm)"] == "The stack as the model sees it"
    assert "Example: kv outputs.past_key_values -1" in result.stdout
    assert BANNER not in result.stdout  # not a terminal: no banner
    assert "script done" in result.stdout


@BASES
def test_banner_once_at_the_first_stop_on_a_terminal(base_env, tmp_path):
    script = tmp_path / "loop.py"
    script.write_text("for i in range(2):\n    breakpoint()\nprint('loop done')\n")
    env = {"PYTHONPATH": ROOT, "PYTHONBREAKPOINT": "llmpdb.set_trace", **base_env}
    with PtySession([str(script)], env=env, timeout=60) as s:
        first = s.wait_prompt()
        assert BANNER in " ".join(first.split())
        second = s.run("c")
        assert "loop.py" in second and BANNER not in " ".join(second.split())
        rest = s.finish("c")
    assert "loop done" in rest
