"""break-module on a torch.compile'd model: dynamo never starts the forward's Python frame, so say so."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from llmpdb.commands.navigation import set_user_root
from llmpdb.forward.breakpoints import module_breakpoints
from llmpdb.inspect.module_compile import compiled_reason, compiled_warning
from llmpdb.session import SESSION
from tiny_models import plain_model
from transcript import debug_transcript

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HINT = "rerun with `python -m llmpdb --no-compile` (sets TORCHDYNAMO_DISABLE=1)"


@pytest.fixture(autouse=True)
def fresh_session(monkeypatch):
    monkeypatch.delenv("TORCHDYNAMO_DISABLE", raising=False)
    module_breakpoints().clear()
    SESSION.reset()
    yield
    module_breakpoints().clear()
    set_user_root(None)
    SESSION.reset()
    torch._dynamo.reset()


def after(out: str, command_index: int) -> str:
    return out.split("(llmpdb) ")[command_index + 1]


def test_break_module_on_a_compiled_model_warns_and_names_no_compile():
    results = []

    def program():
        model = torch.compile(plain_model(), backend="eager")
        breakpoint()
        with torch.no_grad():
            results.append(model(torch.tensor([[1, 2, 3]]))[0].shape)

    out = debug_transcript(program, ["c", "bm blocks.0", "c"], width=80)
    armed = after(out, 1).splitlines()
    assert armed[0] == "module breakpoint 1: blocks.0 -> blocks.0"
    assert all(len(line) <= 80 for line in armed), armed  # the warning wraps at spaces
    assert "  " + " ".join(" ".join(armed[1:]).split()) == ("  warning: blocks.0 runs under torch.compile (the "
                        "model is wrapped by torch.compile "
                        "(OptimizedModule, _orig_mod)); dynamo does not start its Python forward, so this "
                        f"breakpoint will not stop there; {HINT}")
    # what the warning promises: the compiled model runs through without stopping
    assert results == [torch.Size([1, 3, 64])] and "module breakpoint 1: blocks.0 (" not in out
    assert module_breakpoints().breakpoints()[0].calls >= 1  # the hook ran: only the forward frame never came


def test_compile_method_and_compiled_forwards_are_told_from_stored_attributes():
    model = plain_model()
    assert compiled_reason(model, "blocks.0") is None and compiled_warning("blocks.0", [model]) is None
    model.blocks[1].compile(backend="eager")
    assert compiled_reason(model, "blocks.1") == "blocks.1 was compiled with .compile()"
    assert compiled_reason(model, "blocks.0") is None
    model.forward = torch.compile(model.forward, backend="eager")
    assert compiled_reason(model, "blocks.0") == "the forward of the root (PlainLM) is a torch.compile'd function"
    assert compiled_warning("blocks.0", [model]).startswith("warning: blocks.0 runs under torch.compile (")


def test_no_warning_when_dynamo_is_off(monkeypatch):
    monkeypatch.setenv("TORCHDYNAMO_DISABLE", "1")
    assert compiled_warning("blocks.0", [torch.compile(plain_model(), backend="eager")]) is None


def test_no_compile_makes_the_breakpoint_stop(tmp_path):
    script = tmp_path / "compiled.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.append({os.path.join(ROOT, "tests")!r})
        import torch
        from tiny_models import plain_model
        model = torch.compile(plain_model(), backend="eager")
        breakpoint()
        with torch.no_grad():
            model(torch.tensor([[1, 2, 3]]))
        print("done")
    """))
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": ROOT}
    env.pop("PYTHONBREAKPOINT", None)
    env.pop("TORCHDYNAMO_DISABLE", None)
    result = subprocess.run([sys.executable, "-m", "llmpdb", "--no-compile", str(script)],
                            input="c\nbm blocks.0\nc\np type(self).__name__, x.shape\nc\n", capture_output=True,
                            text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "module breakpoint 1: blocks.0 -> blocks.0\n" in result.stdout and "warning" not in result.stdout
    assert "module breakpoint 1: blocks.0 (PlainAttention), hit 1" in result.stdout
    assert "('PlainAttention', torch.Size([1, 3, 32]))" in result.stdout and "done" in result.stdout
