"""Stepping and the stack as a user sees them: `s` into a model, `sf`, `step-all`, no llmpdb frames, and
frame numbers equal with and without the fast engine and under `python -m pdb`.

The model sessions run a tiny real transformers Llama in a pty; the `where` comparisons feed the same
commands through a pipe to `python -m llmpdb` (both engines) and to `python -m pdb`.
"""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
import textwrap

import pytest

from .pty_session import ROOT, PtySession, clean

pytestmark = pytest.mark.timeout(180)

MODEL_SCRIPT = """\
import sys
sys.path.insert(0, {tests!r})
import torch
from tiny_models import tiny_llama

model = tiny_llama()
inputs = {{"input_ids": torch.tensor([[1, 2, 3, 4]])}}
with torch.no_grad():
    breakpoint()
    outputs = model(**inputs)
print("logits", tuple(outputs.logits.shape))
"""

PLAIN_SCRIPT = """\
def inner(x):
    y = x + 1
    breakpoint()
    return y


def outer():
    return inner(2)


z = outer()
breakpoint()
print("z is", z)
"""
INNER_LINE = 4  # `return y`: where breakpoint() stops, and where `b` puts a breakpoint
B_SCRIPT = PLAIN_SCRIPT.replace("    breakpoint()\n", "    pass\n", 1)  # same lines, no breakpoint() in inner


def _write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _llama_forward_line() -> int:
    from transformers import LlamaForCausalLM

    return inspect.unwrap(LlamaForCausalLM.forward).__code__.co_firstlineno


def _header(stop: str) -> str:
    """The `[N] > file(line)func()` line of a stop."""
    return next(line for line in stop.splitlines() if re.match(r"^\[\s*\d+\] > ", line))


def test_one_step_from_a_model_call_lands_in_its_forward(tmp_path):
    script = _write(tmp_path, "step_model.py", MODEL_SCRIPT.format(tests=os.path.join(ROOT, "tests")))
    with PtySession(["-m", "llmpdb", script]) as s:
        s.wait_prompt()
        assert "outputs = model(**inputs)" in s.run("c")
        stop = s.run("s")
        assert "--Call--" in stop
        header = _header(stop)
        assert header.endswith(f"modeling_llama.py({_llama_forward_line()})forward()"), header
        assert s.run("p type(self).__name__").strip() == "'LlamaForCausalLM'"

        first = s.run("sf")
        assert "--Forward-- model (LlamaModel)" in first
        assert _header(first).endswith("forward()") and "modeling_llama.py" in _header(first)
        second = s.run("step-forward")
        assert "--Forward-- model.embed_tokens (Embedding)" in second
        assert "torch/nn/modules/sparse.py" in _header(second)
        # `s` on a line that calls a torch function (not a module) steps over torch's Python
        body = s.run("s")
        assert "sparse.py" in _header(body) and "--Call--" not in body
        assert "logits (1, 4, 256)" in s.finish("c")


def test_step_all_and_the_environment_show_the_plumbing(tmp_path):
    script = _write(tmp_path, "step_all.py", MODEL_SCRIPT.format(tests=os.path.join(ROOT, "tests")))
    with PtySession(["-m", "llmpdb", script]) as s:
        s.wait_prompt()
        s.run("c")
        stop = s.run("step-all")
        assert "torch/nn/modules/module.py" in _header(stop) and "_wrapped_call_impl()" in _header(stop)
        assert "step-all: takes no argument" in s.run("step-all now")
        s.finish("c")
    with PtySession(["-m", "llmpdb", script], env={"LLMPDB_STEP_PLUMBING": "1"}) as s:
        s.wait_prompt()
        s.run("c")
        assert "_wrapped_call_impl()" in _header(s.run("s"))
        s.finish("c")


def test_step_on_breakpoint_and_up_never_show_llmpdb(tmp_path):
    script = _write(tmp_path, "plain.py", PLAIN_SCRIPT)
    with PtySession(["-m", "llmpdb", script]) as s:
        s.wait_prompt()
        s.run("c")
        s.run("c")  # the second breakpoint(), at module level
        s.run("up")
        stop = s.run("down")
        assert "z is 3" not in stop and "plain.py(13)<module>()" in _header(stop)
        step = s.run("s")  # the line calls print(): the next stop is the program's own next event
        assert "llmpdb" not in step and "hooks.py" not in step
        ups = [s.run("u") for _ in range(4)]
        assert "Oldest frame" in ups[-1]
        assert not any("llmpdb" in out or "cli.py" in out for out in ups), ups
        s.finish("c")


@pytest.mark.parametrize("base", ["stdlib", ""])
def test_s_on_a_breakpoint_line_steps_over_the_hook(tmp_path, base):
    script = _write(tmp_path, "twice.py", textwrap.dedent("""\
        def main():
            breakpoint()
            breakpoint()
            a = 1
            return a


        main()
        """))
    with PtySession(["-m", "llmpdb", script], env={"LLMPDB_BASE": base or None}) as s:
        s.wait_prompt()
        assert "twice.py(3)main()" in s.run("c")
        stop = s.run("s")  # onto breakpoint(): pdb would enter llmpdb/hooks.py here
        assert "twice.py(4)main()" in stop and "hooks.py" not in stop
        s.finish("c")


# ---- frame numbers: where, compared ------------------------------------------------------------------
_PROMPT = re.compile(r"\((?:llmpdb|Pdb\+\+|Pdb)\) ")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _stops(argv: list[str], commands: list[str], env: dict | None = None) -> list[str]:
    """What each prompt of a piped session printed before it, prompts normalised."""
    full_env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120", **(env or {})}
    full_env.pop("PYTHONBREAKPOINT", None)
    result = subprocess.run([sys.executable, *argv], input="\n".join(commands) + "\n", capture_output=True,
                            text=True, cwd=ROOT, env=full_env, timeout=90)
    return _PROMPT.split(clean(_ANSI.sub("", result.stdout)))


def _where_at(argv: list[str], first: list[str], env: dict | None = None) -> str:
    """The `where` output after the commands ``first``."""
    return _stops(argv, [*first, "w", "c", "c", "c"], env)[len(first) + 1]


ENGINES = [{"LLMPDB_FAST_BREAKPOINTS": "1"}, {"LLMPDB_FAST_BREAKPOINTS": "0"}]


def test_where_at_breakpoint_call_is_the_same_with_both_engines_and_as_at_b(tmp_path):
    script = _write(tmp_path, "plain.py", PLAIN_SCRIPT)
    wheres = [_where_at(["-m", "llmpdb", script], ["c"], env) for env in ENGINES]
    assert wheres[0] == wheres[1]
    assert "llmpdb" not in wheres[0] and "cli.py" not in wheres[0]
    _write(tmp_path, "plain.py", B_SCRIPT)
    at_b = _where_at(["-m", "llmpdb", script], [f"b {INNER_LINE}", "c"], ENGINES[0])
    assert at_b == wheres[0]
    assert re.search(r"^> \[4\] .*plain\.py\(4\)inner\(\)$", wheres[0], re.M), wheres[0]


def test_where_at_b_equals_python_m_pdb(tmp_path):
    script = _write(tmp_path, "plain.py", B_SCRIPT)
    commands = [f"b {INNER_LINE}", "c"]
    ours = [_where_at(["-m", "llmpdb", script], commands, env) for env in ENGINES]
    pdb_where = _where_at(["-m", "pdb", script], commands)
    assert ours[0] == ours[1] == pdb_where


def test_where_at_breakpoint_call_has_pdbs_frames_from_bdb_run(tmp_path):
    """`python -m pdb` lists its own launcher above bdb's run frame at a breakpoint() (and numbers it);
    llmpdb starts the stack at bdb's run frame as pdb does for a `b` breakpoint: the frames shown are
    the same."""
    script = _write(tmp_path, "plain.py", PLAIN_SCRIPT)
    unnumbered = re.compile(r"^(>?)\s*\[\s*\d+\] ")

    def from_bdb_run(text: str) -> list[str]:
        lines = [unnumbered.sub(r"\1", line).strip() for line in text.splitlines()]
        return lines[next(i for i, line in enumerate(lines) if "bdb.py(" in line):]

    ours = _where_at(["-m", "llmpdb", script], ["c"])
    assert from_bdb_run(ours) == from_bdb_run(_where_at(["-m", "pdb", script], ["c"]))


def test_stdlib_base_where_has_no_llmpdb_frames(tmp_path):
    script = _write(tmp_path, "plain.py", PLAIN_SCRIPT)
    where = _where_at(["-m", "llmpdb", script], ["c"], {"LLMPDB_BASE": "stdlib"})
    assert "plain.py(4)inner()" in where and "bdb.py" in where
    assert "llmpdb" not in where and "cli.py" not in where and "runpy" not in where


def test_s_steps_over_imports_and_into_modeling_functions(tmp_path):
    script = _write(tmp_path, "imports.py", textwrap.dedent("""\
        import torch
        from transformers.models.llama.modeling_llama import rotate_half
        breakpoint()
        import xml.dom.minidom
        import pexpect
        y = rotate_half(torch.ones(1, 4))
        print("done", tuple(y.shape))
        """))
    with PtySession(["-m", "llmpdb", script]) as s:
        s.wait_prompt()
        assert "imports.py(4)<module>()" in _header(s.run("c"))
        assert "imports.py(5)<module>()" in _header(s.run("s"))  # the standard library's import: stepped over
        assert "imports.py(6)<module>()" in _header(s.run("s"))  # an installed package's import too
        into = s.run("s")  # a modeling function called from the user's code stops
        assert "--Call--" in into and "modeling_llama.py" in _header(into) and "rotate_half()" in _header(into)
        assert "done (1, 4)" in s.finish("c")
