"""Pending module breakpoints: set before the model exists, armed when it is built or first runs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import torch

from llmpdb.forward.breakpoints import ModuleBreakpointEngine
from tiny_models import plain_model, tiny_llama

GLOBAL_PRE_HOOKS = torch.nn.modules.module._global_forward_pre_hooks


class Recorder:
    def __init__(self):
        self.stops = []

    def __call__(self, frame, header):
        self.stops.append((frame.f_code.co_qualname, frame.f_locals.get("self"), header))


def test_a_path_pattern_waits_for_the_first_model_whose_forward_runs():
    recorder = Recorder()
    engine = ModuleBreakpointEngine(recorder)
    before = len(GLOBAL_PRE_HOOKS)
    bp = engine.add("layers.1.self_attn", [], pending=True)
    assert bp.pending and bp.labels == {}
    assert len(GLOBAL_PRE_HOOKS) == before + 1  # the root watch, only while something is pending
    model = tiny_llama()
    assert bp.pending  # a path needs a root: building the model does not arm it
    try:
        with torch.no_grad():
            model(torch.tensor([[1, 2, 3]]))
            model(torch.tensor([[4, 5]]))
    finally:
        engine.clear()
    assert [(code, module is model.model.layers[1].self_attn) for code, module, _ in recorder.stops] == [
        ("LlamaAttention.forward", True)] * 2
    assert recorder.stops[0][2] == "module breakpoint 1: model.layers.1.self_attn (LlamaAttention), hit 1"
    assert bp.labels == {id(model.model.layers[1].self_attn): "model.layers.1.self_attn"}
    assert engine.take_messages() == ["module breakpoint 1: layers.1.self_attn was pending; armed on "
                                      "model.layers.1.self_attn when LlamaForCausalLM's forward ran"]
    assert len(GLOBAL_PRE_HOOKS) == before


def test_the_root_watch_goes_as_soon_as_nothing_is_pending():
    engine = ModuleBreakpointEngine(Recorder())
    before = len(GLOBAL_PRE_HOOKS)
    model = plain_model()
    engine.add("blocks.0", [model], condition="False")          # matches now: no global hook
    assert len(GLOBAL_PRE_HOOKS) == before
    pending = engine.add("decoder.blocks.0", [model], pending=True)
    assert pending.pending and len(GLOBAL_PRE_HOOKS) == before + 1
    with torch.no_grad():
        model(torch.tensor([[1, 2]]))                            # a model already looked at: still pending
    assert pending.pending and len(GLOBAL_PRE_HOOKS) == before + 1
    engine.remove(pending.number)
    assert len(GLOBAL_PRE_HOOKS) == before
    engine.clear()


def test_a_class_pattern_arms_on_construction_inside_another_model():
    recorder = Recorder()
    engine = ModuleBreakpointEngine(recorder)
    first = plain_model(layers=1)
    bp = engine.add("LlamaMLP", [first], pending=True, once=True)  # a class of a model built later
    assert bp.pending and bp.near == ()
    later = tiny_llama()
    assert not bp.pending and len(bp.labels) == 2                 # armed while the layers were built
    with torch.no_grad():
        later(torch.tensor([[1, 2]]))
    engine.clear()
    assert [(code, module is later.model.layers[0].mlp) for code, module, _ in recorder.stops] == [
        ("LlamaMLP.forward", True)]


def test_without_pending_a_name_that_matches_nothing_is_an_error_with_near_names():
    engine = ModuleBreakpointEngine(Recorder())
    model = tiny_llama()
    try:
        engine.add("layers.1.self_atn", [model])
    except ValueError as exc:
        assert str(exc).startswith("no module matches 'layers.1.self_atn'; near: ")
    else:
        raise AssertionError("no error")
    bp = engine.add("layers.1.self_atn", [model], pending=True)
    assert bp.pending and "model.layers.1.self_attn" in bp.near
    engine.clear()


def test_pending_before_import_torch_arms_after_the_import(tmp_path):
    script = tmp_path / "late_torch.py"
    script.write_text(textwrap.dedent("""
        import sys
        from llmpdb.forward.breakpoints import ModuleBreakpointEngine
        assert "torch" not in sys.modules
        stops = []
        engine = ModuleBreakpointEngine(lambda frame, header: stops.append(header))
        engine.add("blocks.1", [], pending=True)
        sys.path.append(sys.argv[1])
        import torch
        from tiny_models import plain_model
        hooks = len(torch.nn.modules.module._global_forward_pre_hooks)
        model = plain_model()
        with torch.no_grad():
            model(torch.tensor([[1, 2]]))
        print(hooks, len(torch.nn.modules.module._global_forward_pre_hooks), stops)
    """))
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    result = subprocess.run([sys.executable, str(script), tests], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": os.path.dirname(tests)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1 0 ['module breakpoint 1: blocks.1 (PlainAttention), hit 1']"
