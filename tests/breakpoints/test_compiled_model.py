"""A line breakpoint inside the forward of a ``torch.compile``'d model (issue #21): dynamo must never read
a hook (3.11: a function in ``co_consts`` makes it fail with ``Cannot construct ConstantVariable``). The
program runs as it runs without the breakpoint, and llmpdb says once that the breakpoint cannot fire
inside compiled code. Real ``python -m llmpdb`` subprocesses, a tiny Llama, ``backend="eager"``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOTE = "a breakpoint cannot stop inside compiled code"

SCRIPT = """
import sys
sys.path.append({tests!r})
import torch
from tiny_models import tiny_llama
model = tiny_llama()
ids = torch.tensor([[1, 2, 3]])
with torch.no_grad():
    expected = model(ids).logits
compiled = torch.compile(model, backend="eager")
breakpoint()
with torch.no_grad():
    first = compiled(ids).logits
    second = compiled(torch.tensor([[4, 5, 6, 7]])).logits
print("SAME", bool(torch.equal(first, expected)), tuple(second.shape))
"""


def _mlp_line() -> tuple[str, int]:
    import inspect

    from transformers.models.llama import modeling_llama

    lines, start = inspect.getsourcelines(modeling_llama.LlamaMLP.forward)
    return modeling_llama.__file__, start + 1  # ``down_proj = ...``, the forward's first statement


def _run(tmp_path, commands: list[str], script: str = SCRIPT):
    path = tmp_path / "compiled_llama.py"
    path.write_text(textwrap.dedent(script.format(tests=os.path.join(ROOT, "tests"))))
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": ROOT}
    for name in ("PYTHONBREAKPOINT", "TORCHDYNAMO_DISABLE", "LLMPDB_FAST_BREAKPOINTS"):
        env.pop(name, None)
    return subprocess.run([sys.executable, "-m", "llmpdb", str(path)], input="".join(c + "\n" for c in commands),
                          capture_output=True, text=True, env=env, timeout=240, cwd=str(tmp_path))


def test_breakpoint_in_a_compiled_models_forward_set_at_a_stop(tmp_path):
    filename, line = _mlp_line()
    result = _run(tmp_path, ["c", f"b {filename}:{line}", "c", "c"])
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-3000:]
    assert "SAME True (1, 4, 256)" in result.stdout, out[-3000:]
    assert "Traceback" not in out and "ConstantVariable" not in out and "post-mortem" not in out
    assert out.count(NOTE) == 1, out[-3000:]


def test_breakpoint_set_before_torch_is_imported(tmp_path):
    filename, line = _mlp_line()
    result = _run(tmp_path, [f"b {filename}:{line}", "c", "c"])
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-3000:]
    assert "SAME True (1, 4, 256)" in result.stdout, out[-3000:]
    assert "Traceback" not in out and "ConstantVariable" not in out and "post-mortem" not in out
    assert out.count(NOTE) == 1, out[-3000:]
