"""``nan-break`` typed at a script's first line, before ``import torch`` (``python -m llmpdb`` in a real pty):
it arms when torch is imported (as ``bm`` does) and pauses at the module whose output overflows."""

from __future__ import annotations

from .pty_session import PtySession

SCRIPT = '''\
import torch
from torch import nn


class Scale(nn.Module):
    def forward(self, x):
        return x * 0 + 1e5  # past float16's 65504 whatever the random Linear gave: 8 Inf


model = nn.Sequential(nn.Linear(4, 4), Scale()).half()
out = model(torch.full((2, 4), 1.0).half())
print("finished", out.dtype)
'''


def test_nan_break_at_the_first_line_arms_on_import(tmp_path):
    script = tmp_path / "overflow.py"
    script.write_text(SCRIPT)
    with PtySession(["-m", "llmpdb", str(script)], timeout=40, width=100) as s:
        s.wait_prompt()
        out = s.run("nan-break")
        assert "nan-break: armed for when torch is imported" in out, out
        stop = s.run("c")
        assert "NaN" in stop or "Inf" in stop, stop
        assert "nan-break: 1 (Scale) output has 0 NaN, 8 Inf of 8 values" in stop, stop
        s.finish("q")
