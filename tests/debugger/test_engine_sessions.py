"""One transcript per session whatever delivers the events: the fast engine or pdb's own tracing, with module
breakpoints (`bm`, conditional too) and `nan-break` armed on a small PyTorch model (torch: Python 3.11 in CI;
the torch-free sessions are in tests/debugger/test_pipeline.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MODEL = """\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(Block() for _ in range(3))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


torch.manual_seed(0)
model = Net()
x = torch.ones(2, 4)
breakpoint()
for step in range(2):
    y = model(x)
    if step == 1:
        with torch.no_grad():
            model.layers[1].fc.weight[0, 0] = float("nan")
y = model(x)
print("done", tuple(y.shape))
"""

SESSIONS = {
    "bm": "bm layers.1\nc\nsm\nc\nsm\nclear-module all\nc\n",
    "bm if": "bm layers.* if x.shape[0] == 2 and step == 1\nc\np step\nclear-module all\nc\n",
    "nan-break": "nan-break\nc\nsm\nc\n",
}


def _run(tmp_path, commands: str, fast: str) -> str:
    script = tmp_path / "net.py"
    script.write_text(textwrap.dedent(MODEL))
    env = {**os.environ, "PYTHONPATH": ROOT, "PYTHONBREAKPOINT": "llmpdb.set_trace", "NO_COLOR": "1",
           "COLUMNS": "100", "LLMPDB_FAST_BREAKPOINTS": fast, "PDBPP_HIJACK_PDB": "0"}
    env.pop("LLMPDB_HEADLESS", None)
    result = subprocess.run([sys.executable, str(script)], input=commands, env=env, capture_output=True,
                            text=True, timeout=120)
    return result.stdout + result.stderr


@pytest.mark.parametrize("name", sorted(SESSIONS))
def test_module_breakpoints_and_nan_break_read_the_same_with_either_engine(tmp_path, name):
    fast, stock = _run(tmp_path, SESSIONS[name], "1"), _run(tmp_path, SESSIONS[name], "0")
    assert "Traceback" not in fast and "internal error" not in fast, fast
    assert "done (2, 4)" in fast
    assert fast == stock
