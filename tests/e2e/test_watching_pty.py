"""`trace` and `watch` typed into a real terminal at the stops of examples/infer.py."""

from __future__ import annotations

import pytest

from .pty_session import PtySession

pytestmark = pytest.mark.timeout(150)


def test_trace_and_watch_in_a_terminal():
    with PtySession(["-m", "llmpdb", "examples/infer.py"], width=100) as s:
        s.wait_prompt()
        s.run("c")
        assert s.run("watch inputs['input_ids']").startswith("watch 1: inputs['input_ids'] = (1, ")
        assert s.run("watch outputs").startswith("watch 2: outputs = NameError: name 'outputs' is not defined")
        s.run("c")
        table = [line for line in s.run("trace model(**inputs)").splitlines() if line.strip()]
        assert table[0].split() == ["module", "class", "in", "out", "dtype"]
        assert max(len(line) for line in table) <= 100
        cells = [line.split()[0] for line in table[1:] if line.strip()]
        assert cells[:4] == ["(root)", "model", ".embed_tokens", ".rotary_emb"]
        assert ".layers.{0..1}" in cells and ".norm" in cells and "lm_head" in cells
        assert table[-2].endswith("(identical layers folded; --all lists each)")
        assert s.run("trace nothing_like_this").startswith("*** trace: no module matches 'nothing_like_this'")
        stop3 = s.run("c")
        assert "watch 2 outputs: NameError: name 'outputs' is not defined → CausalLMOutputWithPast" in stop3
        history = s.run("watch").splitlines()
        assert history[0] == "watch 1: inputs['input_ids']  (0 changes)"
        assert "watch 2: outputs  (1 change)" in history
        assert s.run("help trace").startswith("trace [PATTERN | EXPR] [--depth N] [--all] | trace off")
        rest = s.finish("c")
    assert "done" in rest and s.exitstatus == 0
