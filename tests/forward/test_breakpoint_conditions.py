"""A ``break-module`` condition that raises anything — ``SystemExit`` (``exit()``), ``KeyboardInterrupt``,
``GeneratorExit`` — stops at the forward with a one-line note naming the exception, as line and ``catch``
conditions do; it never ends the program (issue #21). In process with a recording stopper, and a real
``python -m llmpdb`` run of a tiny Llama. (``exit()`` itself also closes ``sys.stdin``: the stop then
finds no console and waits for ``attach``, as for any closed stdin.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

from llmpdb.forward.breakpoints import ModuleBreakpointEngine

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
THROW = "(_ for _ in ()).throw({})"


class Block(nn.Module):
    def forward(self, x):
        return x + 1


class Stops:
    def __init__(self):
        self.headers = []

    def __call__(self, frame, header):
        self.headers.append((frame.f_code.co_name, header))


class Loud(BaseException):
    def __str__(self):
        raise RuntimeError("no str for you")


@pytest.mark.parametrize("condition, named", [
    ("sys.exit()", "SystemExit"),
    ("sys.exit('two\\nlines')", "SystemExit: two lines"),
    (THROW.format("KeyboardInterrupt"), "KeyboardInterrupt"),
    (THROW.format("GeneratorExit"), "GeneratorExit"),
    ("(_ for _ in ()).throw(Loud)", "Loud"),
])
def test_a_condition_raising_a_base_exception_stops_and_names_it(condition, named):
    module = Block()
    stops = Stops()
    engine = ModuleBreakpointEngine(stops)
    engine.add("Block", [module], condition=condition)
    try:
        result = module(torch.ones(1))  # nothing escapes into the program's forward
    finally:
        engine.clear()
    assert torch.equal(result, torch.full((1,), 2.0))
    assert len(stops.headers) == 1 and stops.headers[0][0] == "forward"
    lines = stops.headers[0][1].splitlines()
    assert lines[0].startswith("module breakpoint 1: (root Block) (Block), hit 1, if ")
    assert len(lines) == 2 and lines[1].startswith(f"  condition {condition!r} raised {named}")


SCRIPT = """
import sys
sys.path.append({tests!r})
import torch
from tiny_models import tiny_llama
model = tiny_llama()
breakpoint()
with torch.no_grad():
    out = model(torch.tensor([[1, 2, 3]]))
print("FINISHED", tuple(out.logits.shape))
"""


RAISING = [(THROW.format("SystemExit(3)"), "SystemExit: 3"), (THROW.format("KeyboardInterrupt"), "KeyboardInterrupt")]


def test_bm_condition_raising_in_a_tiny_llama_stops_and_the_program_goes_on(tmp_path):
    """One run, two layers: each layer's condition raises its own BaseException (one torch start)."""
    pytest.importorskip("transformers")
    path = tmp_path / "llama_bm.py"
    path.write_text(textwrap.dedent(SCRIPT.format(tests=os.path.join(ROOT, "tests"))))
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": ROOT}
    env.pop("PYTHONBREAKPOINT", None)
    commands = ["c", *(f"bm model.layers.{layer} if {condition}" for layer, (condition, _) in enumerate(RAISING))]
    commands += ["c", "p type(self).__name__, self.self_attn.layer_idx", "c", "p type(self).__name__, self.self_attn.layer_idx", "c"]
    result = subprocess.run([sys.executable, "-m", "llmpdb", str(path)], input="".join(c + "\n" for c in commands),
                            capture_output=True, text=True, env=env, timeout=180, cwd=str(tmp_path))
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-3000:]
    said = [result.stdout.index(f"  condition {condition!r} raised {named}") for condition, named in RAISING]
    assert said[0] < said[1], out[-3000:]  # layer 0 first, each naming its own exception
    stopped_in = re.findall(r"\('LlamaDecoderLayer', (\d)\)", result.stdout)
    assert stopped_in == ["0", "1"], out[-3000:]  # stopped in each layer's forward, in order
    assert "FINISHED (1, 3, 256)" in result.stdout and "Traceback" not in out
