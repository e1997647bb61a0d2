"""``nan-break`` typed at a script's first line, before ``import torch`` (``python -m llmpdb`` in a real pty):
it arms when torch is imported (as ``bm`` does) and pauses at the module whose output overflows. With
``--blocks`` the first module called is taken as the model and its blocks are checked."""

from __future__ import annotations

import pytest

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


@pytest.mark.parametrize("command, armed", [
    ("nan-break", "nan-break: armed for when torch is imported: will check module outputs;"),
    ("nan-break --blocks", "nan-break: armed for when torch is imported: will check the outputs of the blocks"
                           " of the first model called;"),
])
def test_nan_break_at_the_first_line_arms_on_import(tmp_path, command, armed):
    script = tmp_path / "overflow.py"
    script.write_text(SCRIPT)
    with PtySession(["-m", "llmpdb", str(script)], timeout=40, width=100) as s:
        s.wait_prompt()
        out = s.run(command)
        assert armed in " ".join(out.split()), out
        stop = s.run("c")
        assert "NaN" in stop or "Inf" in stop, stop
        assert "nan-break: 1 (Scale) output has 0 NaN, 8 Inf of 8 values" in stop, stop
        s.finish("q")
