"""``catch``: a shape error inside a tiny Llama's forward pauses in the raising frame (LlamaRMSNorm.forward),
before the script's ``except`` runs; in a real pty, on both debugger bases."""

from __future__ import annotations

import pytest

from .pty_session import PtySession

BASES = pytest.mark.parametrize("base_env", [{}, {"LLMPDB_BASE": "stdlib"}], ids=["pdb++", "stdlib-pdb"])
ENV = {"PYTHONBREAKPOINT": "llmpdb.set_trace"}


def _rows(text: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split()[1:] for line in text.splitlines() if line.split()}


@BASES
def test_catch_stops_in_the_raising_frame_of_a_shape_error(base_env):
    with PtySession(["tests/e2e/catch_script.py"], env={**ENV, **base_env}, timeout=120) as s:
        s.wait_prompt()
        assert "catch 1: *Error if \"must match\" in str(e)" in s.run('catch *Error if "must match" in str(e)')
        stop = s.run("c")
        assert ("catch 1: RuntimeError: The size of tensor a (64) must match the size of tensor b (48) at "
                "non-singleton dimension 2  (raised here; no handler ran yet)") in stop
        assert "modeling_llama.py" in stop and "forward()" in stop
        assert "-> return self.weight * hidden_states.to(input_dtype)" in stop
        assert "handled:" not in stop  # the script's except has not run
        assert s.run("p type(self).__name__").strip() == "'LlamaRMSNorm'"
        assert _rows(s.run("shapes"))["hidden_states"][:4] == ["(1,", "3,", "48)", "f32"]
        assert "model.layers.0.input_layernorm" in s.run("sm")
        listing = s.run("catch")
        assert _rows(listing)["1"][-1] == "1"  # one hit
        assert "removed catch 1" in s.run("uncatch 1")
        rest = s.finish("c")
    assert "handled: The size of tensor a (64)" in rest and "catch script done" in rest
    assert s.exitstatus == 0


@BASES
def test_catch_by_class_name_then_uncatch_all(base_env):
    with PtySession(["tests/e2e/catch_script.py"], env={**ENV, **base_env}, timeout=120) as s:
        s.wait_prompt()
        s.run("catch RuntimeError")
        stop = s.run("c")
        assert "catch 1: RuntimeError: The size of tensor a (64)" in stop
        assert "-> return self.weight * hidden_states.to(input_dtype)" in stop
        assert "removed catch 1: RuntimeError" in s.run("uncatch all")
        assert "no exception breakpoints" in s.run("catch")
        rest = s.finish("c")
    assert "handled: The size of tensor a (64)" in rest
