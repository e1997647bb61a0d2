"""``run`` / ``restart`` at the prompt, in a pty: under ``python -m llmpdb`` the program restarts as in pdb
(breakpoints kept, ``run ARGS`` sets ``sys.argv``); under ``PYTHONBREAKPOINT`` it refuses in one line and the
program finishes with its own status. Before, both printed a ``pdb.Restart`` traceback."""

from __future__ import annotations

import textwrap

import pytest

from .pty_session import PtySession

SCRIPT = textwrap.dedent(
    """
    import sys
    def grow(k):
        bigger = k + 1
        return bigger
    print("args", sys.argv[1:], "grown", grow(len(sys.argv)))
    breakpoint()
    sys.exit(3)
    """
)
REFUSAL = ("*** run: cannot restart here: only a program started by `python -m llmpdb` can be restarted "
           "(this stop came from breakpoint()/set_trace())")


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "again.py"
    path.write_text(SCRIPT)
    return path


@pytest.mark.parametrize("base", ["pdb++", "stdlib"])
def test_run_restarts_a_program_started_by_llmpdb(script, base):
    env = {"LLMPDB_BASE": "stdlib" if base == "stdlib" else None, "PYTHONBREAKPOINT": None}
    with PtySession(["-m", "llmpdb", str(script), "first"], env=env, timeout=60) as session:
        session.wait_prompt()
        assert "Breakpoint 1 at" in session.run("b 5")
        assert "again.py(5)grow()" in session.run("c")
        assert session.run("p bigger").strip() == "3"
        restarted = session.run("run a 'b c'")
        assert f"llmpdb: restarting {script} with arguments: a b c" in restarted, restarted
        assert "again.py(2)<module>()" in restarted  # the first line again
        assert "Traceback" not in restarted and "Restart" not in restarted.replace("restarting", "")
        assert "again.py(5)grow()" in session.run("c")  # the breakpoint was kept
        assert session.run("p bigger, sys.argv[1:]").strip() == "(4, ['a', 'b c'])"
        session.run("c")  # the breakpoint() line
        assert "grown 4" in "\n".join(session.transcript)
        rest = session.finish("c")
        assert "llmpdb: the program exited via sys.exit(3)" in rest
        assert session.exitstatus == 3


@pytest.mark.parametrize("command", ["run", "restart x"])
def test_run_under_pythonbreakpoint_refuses_in_one_line(script, command):
    env = {"PYTHONBREAKPOINT": "llmpdb.set_trace"}
    with PtySession([str(script)], env=env, timeout=60) as session:
        session.wait_prompt()
        refused = session.run(command)
        assert refused.strip() == REFUSAL, refused
        assert session.run("p sys.argv[1:]").strip() == "[]"  # the stop goes on; argv untouched
        rest = session.finish("c")
        assert "Traceback" not in rest
        assert session.exitstatus == 3
    assert "args [] grown 2" in session.transcript[0]


def test_run_in_post_mortem_restarts_the_program(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("import sys\nprint('attempt', sys.argv[1:])\nraise ValueError('bad input')\n")
    with PtySession(["-m", "llmpdb", "-c", "c", str(script)], env={"PYTHONBREAKPOINT": None},
                    timeout=60) as session:
        post_mortem = session.wait_prompt()
        assert "llmpdb: uncaught exception; post-mortem debugging" in post_mortem
        restarted = session.run("run again")
        assert "llmpdb: restarting" in restarted and "fails.py(1)<module>()" in restarted, restarted
        assert "attempt ['again']" in session.run("c")  # back in post-mortem after the second run
        rest = session.finish("q")
        assert "Traceback" not in rest
        assert session.exitstatus == 1


LLAMA_SCRIPT = """\
import sys
sys.path.insert(0, {tests!r})
import torch
from tiny_models import tiny_llama

model = tiny_llama()
breakpoint()
with torch.no_grad():
    outputs = model(input_ids=torch.tensor([[1, 2, 3]]))
print("logits", tuple(outputs.logits.shape))
"""


def _armed_on(listing: str, pattern: str) -> list[str]:
    """The `armed on` column of the module breakpoint rows of `b` for ``pattern``."""
    header = next(line for line in listing.splitlines() if "armed on" in line)
    start = header.index("armed on")
    return [line[start:].split()[0] for line in listing.splitlines() if f" {pattern} " in line]


def test_module_breakpoint_armed_in_run_one_is_pending_and_stops_again_after_run(tmp_path):
    """A `bm` set on run 1's model stops in run 2 too (the new run builds new modules), like pdb's line
    breakpoints; before, it stayed armed on run 1's dead modules and run 2 ran through it."""
    import os

    from .pty_session import ROOT

    script = tmp_path / "llama_again.py"
    script.write_text(LLAMA_SCRIPT.format(tests=os.path.join(ROOT, "tests")))
    with PtySession(["-m", "llmpdb", str(script)], env={"PYTHONBREAKPOINT": None}, timeout=120) as session:
        session.wait_prompt()
        session.run("c")  # the script's breakpoint(): the model exists
        assert session.run("bm layers.1.self_attn").strip() == (
            "module breakpoint 1: layers.1.self_attn -> model.layers.1.self_attn")
        assert "module breakpoint 1: model.layers.1.self_attn (LlamaAttention), hit 1" in session.run("c")
        restarted = session.run("run")
        assert "llmpdb: restarting" in restarted and "llama_again.py(1)<module>()" in restarted, restarted
        assert _armed_on(session.run("b"), "layers.1.self_attn") == ["pending"]
        assert "llama_again.py(8)<module>()" in session.run("c")  # breakpoint() in run 2
        stop = session.run("c")
        assert "module breakpoint 1: model.layers.1.self_attn (LlamaAttention), hit 2" in stop, stop
        assert session.run("p type(self).__qualname__, self.layer_idx").strip() == "('LlamaAttention', 1)"
        assert _armed_on(session.run("b"), "layers.1.self_attn") == ["model.layers.1.self_attn"]
        rest = session.finish("c")
    assert "logits (1, 3, 256)" in rest and session.exitstatus == 0
