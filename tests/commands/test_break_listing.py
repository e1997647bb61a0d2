"""`break` without arguments lists pdb's breakpoints and, beside them, the module breakpoints."""

from __future__ import annotations

import torch

from llmpdb.forward.breakpoints import module_breakpoints
from tiny_models import tiny_llama
from transcript import debug_transcript


def _run(model):
    ids = torch.tensor([[1, 2, 3]])
    breakpoint()
    return model(ids).logits.shape


def test_break_lists_module_breakpoints_beside_pdb_ones():
    here = __file__
    try:
        out = debug_transcript(_run, ["c", f"b {here}:15", "bm layers.0.mlp", "b", "clear-module all", "b", "clear 1",
                                      "c"], tiny_llama())
    finally:
        module_breakpoints().clear()
    listings = out.split("(llmpdb) ")
    first = next(chunk for chunk in listings if chunk.startswith("Num Type"))
    assert f"at {here}:15" in first
    assert "layers.0.mlp" in first and "model.layers.0.mlp" in first
    after_clear = [chunk for chunk in listings if chunk.startswith("Num Type")][1]
    assert "layers.0.mlp" not in after_clear


def _loop():
    total = 0
    breakpoint()
    for i in range(3):
        total += i  # the tbreak line
    return total


def test_tbreak_passes_through_and_stops_once():
    import inspect
    import re

    line = inspect.getsourcelines(_loop)[1] + 4
    out = debug_transcript(_loop, ["c", f"tbreak {__file__}:{line}", "c", "p i", "c"])
    assert re.search(rf"Breakpoint \d+ at {re.escape(__file__)}:{line}", out)
    assert re.search(r"Deleted breakpoint \d+", out)
    assert "(llmpdb) 0\n" in out  # stopped once, in the first iteration


def test_a_breakpoint_call_while_breakpoints_are_set_stops_in_the_caller():
    """With a `b` set, the trace function is active when breakpoint() runs: the stop must land in the
    caller, not inside the debugger's own code."""
    import inspect

    line = inspect.getsourcelines(_loop)[1] + 5
    out = debug_transcript(_loop, [f"b {__file__}:{line}", "c", "p total", "c"])
    stops = [chunk for chunk in out.split("(llmpdb) ") if chunk.startswith("[")]
    assert stops and all("_loop()" in chunk for chunk in stops), out
    assert "bdb.py" not in out


def test_root_model_class_armed_before_the_model_exists_stops_in_its_forward():
    def build_and_run():
        breakpoint()
        model = tiny_llama()
        return model(torch.tensor([[1, 2, 3]])).logits.shape

    try:
        out = debug_transcript(build_and_run, ["c", "bm LlamaForCausalLM --once", "c", "p type(self).__name__",
                                               "p input_ids.shape", "c"])
    finally:
        module_breakpoints().clear()
    assert "armed on LlamaForCausalLM modules as they are created" in out.replace("\n  ", " ")
    assert "'LlamaForCausalLM'" in out
    assert "torch.Size([1, 3])" in out
