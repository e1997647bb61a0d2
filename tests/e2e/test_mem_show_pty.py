"""`mem` and `show` typed into a real terminal at the stop after model(**inputs) in examples/infer.py."""

from __future__ import annotations

import pytest

from llmpdb.units import human_bytes

from .pty_session import PtySession

pytestmark = pytest.mark.timeout(120)


def test_mem_and_show_after_the_model_call():
    with PtySession(["-m", "llmpdb", "examples/infer.py"], width=100, env={"LINES": "30"}) as s:
        s.wait_prompt()
        s.run("c")
        s.run("c")
        assert "logits = outputs.logits" in s.run("c")
        mem = s.run("mem --top 3")
        blocks = mem.strip().split("\n\n")
        assert blocks[0] == "CUDA: not in use (torch.cuda is not initialised)"
        table = blocks[1].splitlines()
        assert table[0].startswith("largest tensors in this frame: 3 of ")
        row = table[2].split()
        assert row[:3] == ["outputs.logits", "(1,", "7,"] and row[4] == "f32"
        vocab = int(row[3].rstrip(")"))
        assert " ".join(row[-2:]) == human_bytes(7 * vocab * 4)
        held = [line.split()[0] for line in blocks[2].splitlines()]
        assert held[0] == "held" and "model" in held and "kv" in held

        heat = s.run("show outputs.logits[0]").strip().splitlines()
        assert heat[0].startswith(f"outputs.logits[0]  f32 (7, {vocab})  values ")
        rows = [line for line in heat if line.count("|") == 2]
        assert len(rows) == 7 and all(len(line) <= 100 for line in heat[1:])
        assert "each cell the mean of up to 1×" in heat[0]
        hist = s.run("show outputs.logits --hist --bins 5").strip().splitlines()
        assert hist[0].endswith(f"{7 * vocab} finite values in 5 bins") and len(hist) == 6
        assert s.run("show outputs").strip().startswith("*** show: outputs is not a tensor")
        rest = s.finish("c")
    assert "done" in rest and s.exitstatus == 0
