"""A file:line breakpoint inside transformers' modeling_llama.py, set from the first stop of
``python -m llmpdb`` before transformers is even imported, hit with the right locals (fast engine)."""

from __future__ import annotations

import importlib.util
import os

import pytest

from .pty_session import PtySession

pytestmark = pytest.mark.timeout(180)


def _o_proj_line() -> tuple[str, int]:
    spec = importlib.util.find_spec("transformers.models.llama.modeling_llama")
    path = spec.origin
    with open(path) as fh:
        for number, line in enumerate(fh, 1):
            if line.strip() == "attn_output = self.o_proj(attn_output)":
                return os.path.realpath(path), number
    pytest.skip("this transformers version has no `attn_output = self.o_proj(attn_output)` line")


@pytest.mark.parametrize("fast", ["1", "0"], ids=["fast-engine", "pdb-tracing"])
def test_breakpoint_in_modeling_file_hits_with_locals(fast):
    path, line = _o_proj_line()
    with PtySession(["-m", "llmpdb", "examples/infer.py"], env={"LLMPDB_FAST_BREAKPOINTS": fast}) as s:
        s.wait_prompt()
        assert f"Breakpoint 1 at {path}:{line}" in s.run(f"b {path}:{line}, attn_output.shape[1] > 1")
        s.run("c")  # stop 1, after the tokenizer
        s.run("c")  # stop 2, at the model call
        hit = s.run("c")
        assert f"modeling_llama.py({line})forward()" in hit
        assert s.run("p attn_output.shape").strip() == "torch.Size([1, 7, 64])"
        assert s.run("p self.layer_idx").strip() == "0"
        after_next = s.run("n")
        assert "return attn_output, attn_weights" in after_next
        hit2 = s.run("c")  # layer 1 of the same forward
        assert f"modeling_llama.py({line})forward()" in hit2
        assert s.run("p self.layer_idx").strip() == "1"
        s.run("cl 1")
        assert "logits = outputs.logits" in s.run("c")  # stop 3: no more stops in the modeling file
        rest = s.finish("c")
    assert "done" in rest
    assert s.exitstatus == 0
