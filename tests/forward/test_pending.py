"""Pending module breakpoints: set before the model exists, armed when it is built or first runs."""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys
import textwrap

import pytest
import torch

from llmpdb.forward.breakpoints import ModuleBreakpointEngine
from llmpdb.forward.guest_hook import GuestHook
from tiny_models import plain_model, tiny_llama

GLOBAL_PRE_HOOKS = torch.nn.modules.module._global_forward_pre_hooks
# 3.12+: a hook on each module not yet seen (told as modules are made); 3.11: one global pre-hook
MODE = "modules" if hasattr(sys, "monitoring") else "global"


def watch_hooks(*models) -> int:
    """The root watch's hooks: the global one, or those on the models' modules."""
    on_modules = sum(isinstance(h, GuestHook) and getattr(h.hook, "__name__", "") == "_first_call"
                     for model in models for m in model.modules() for h in m._forward_pre_hooks.values())
    return on_modules + sum(getattr(h, "__name__", "") == "_hook" for h in GLOBAL_PRE_HOOKS.values())


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
    assert engine._roots.mode == MODE
    assert len(GLOBAL_PRE_HOOKS) == before + (MODE == "global")  # the root watch, only while pending
    model = tiny_llama()
    assert bp.pending  # a path needs a root: building the model does not arm it
    # 3.12+: each module of the new model was told as it was made and carries a first-call hook
    assert watch_hooks(model) == (len(list(model.modules())) - 1 if MODE == "modules" else 1)  # - layers list
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
    engine.add("blocks.0", [model], condition="False")          # matches now: no watch
    assert len(GLOBAL_PRE_HOOKS) == before and not engine._roots.installed
    pending = engine.add("decoder.blocks.0", [model], pending=True)
    assert pending.pending and engine._roots.installed
    assert len(GLOBAL_PRE_HOOKS) == before + (MODE == "global")
    assert watch_hooks(model) == (MODE == "global")              # the model in sight was looked at: no hook
    with torch.no_grad():
        model(torch.tensor([[1, 2]]))                            # a model already looked at: still pending
    assert pending.pending and engine._roots.installed
    engine.remove(pending.number)
    assert len(GLOBAL_PRE_HOOKS) == before and not engine._roots.installed
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
    expected = f"{int(MODE == 'global')} 0 ['module breakpoint 1: blocks.1 (PlainAttention), hit 1']"
    assert result.stdout.strip() == expected


def test_a_model_looked_at_keeps_no_hook_and_one_never_run_pays_nothing():
    engine = ModuleBreakpointEngine(Recorder())
    model, other = tiny_llama(), tiny_llama()    # alive before the breakpoint: found among the gc's objects
    bp = engine.add("vision_tower.blocks.0", [], pending=True)
    try:
        if MODE == "modules":
            assert watch_hooks(model) == watch_hooks(other) == len(list(model.modules())) - 1  # - layers list
        for _ in range(3):
            with torch.no_grad():
                model.generate(torch.tensor([[1, 2, 3]]), max_new_tokens=2, do_sample=False)
        assert bp.pending
        if MODE == "modules":  # looked at once: torch's hook-free fast path from then on
            assert watch_hooks(model) == 0 and watch_hooks(other) == len(list(other.modules())) - 1
            live = [entry[0]() for entry in engine._roots._watched.values()]
            assert not any(isinstance(m, torch.nn.ModuleList) for m in live)  # self.layers[:n] makes one per
            assert not any(m in live for m in model.modules())                 # forward: never watched
        else:
            assert watch_hooks(model) == watch_hooks(other) == 1
    finally:
        engine.clear()
    assert watch_hooks(model, other) == 0 and not engine._roots.installed


@pytest.mark.parametrize("make", ["deepcopy", "pickle"])
def test_a_model_copied_or_unpickled_after_the_breakpoint_arms_at_its_first_call(make):
    template = tiny_llama()                      # built before `bm`, never run itself
    recorder = Recorder()
    engine = ModuleBreakpointEngine(recorder)
    bp = engine.add("layers.1.self_attn", [], pending=True)
    model = copy.deepcopy(template) if make == "deepcopy" else pickle.loads(pickle.dumps(template))
    try:
        assert bp.pending  # no registration hook fires for a copy: only its first call can arm it
        with torch.no_grad():
            model(torch.tensor([[1, 2, 3]]))
    finally:
        engine.clear()
    assert [(code, module is model.model.layers[1].self_attn) for code, module, _ in recorder.stops] == [
        ("LlamaAttention.forward", True)]


def test_a_module_made_alone_after_the_breakpoint_stops_at_its_first_call():
    recorder = Recorder()
    engine = ModuleBreakpointEngine(recorder)
    bp = engine.add("Linear", [], pending=True)
    head = torch.nn.Linear(4, 2)                  # attached to nothing: no registration hook sees it
    assert bp.pending
    try:
        with torch.no_grad():
            head(torch.ones(1, 4))
    finally:
        engine.clear()
    assert [(code, module is head) for code, module, _ in recorder.stops] == [("Linear.forward", True)]
    assert recorder.stops[0][2].startswith("module breakpoint 1: ")


def test_a_model_scripted_while_a_breakpoint_is_pending_scripts_and_is_still_looked_at():
    recorder = Recorder()
    engine = ModuleBreakpointEngine(recorder)
    bp = engine.add("blocks.1", [], pending=True)
    model = plain_model()
    try:
        # torch.jit compiles every hook a module carries; the watch's are taken off while it reads them
        scripted = torch.jit.script(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU()))
        assert scripted(torch.ones(1, 2)).shape == (1, 2)
        assert bp.pending and engine.take_messages() == []
        with torch.no_grad():
            model(torch.tensor([[1, 2]]))
    finally:
        engine.clear()
    assert [(code, module is model.blocks[1]) for code, module, _ in recorder.stops] == [
        ("PlainAttention.forward", True)]


@pytest.mark.parametrize("how", ["torch.save", "deepcopy"])
def test_a_model_saved_or_copied_while_a_breakpoint_is_pending_is_the_programs_own(how, tmp_path):
    engine = ModuleBreakpointEngine(Recorder())
    bp = engine.add("vision.blocks.0", [], pending=True)
    model = plain_model()                         # not run yet: its modules carry the watch's hooks (3.12+)
    try:
        if how == "torch.save":
            torch.save(model, tmp_path / "whole.pt")
            copy_ = torch.load(tmp_path / "whole.pt", weights_only=False)
        else:
            copy_ = copy.deepcopy(model)
        assert bp.pending
        written = [h for m in copy_.modules() for h in (*m._forward_pre_hooks.values(), *m._forward_hooks.values())]
        # what the program wrote holds nothing of llmpdb's (not even an inert stand-in); a copy made while
        # pending is watched as any new module is, by a hook of its own
        assert [h for h in written if not (isinstance(h, GuestHook) and h.owner() is not None)] == []
        assert all(h.owner() is not model and h.owner() in list(copy_.modules()) for h in written)
        assert watch_hooks(model) == (len(list(model.modules())) - 1 if MODE == "modules" else 1)  # kept
    finally:
        engine.clear()
    assert watch_hooks(model, copy_) == 0


def test_what_the_watch_must_not_change_or_miss():
    """Found by trying it as a hostile user would (3.12+: the watch is a hook on each module)."""
    recorder = Recorder()
    engine = ModuleBreakpointEngine(recorder)
    engine.add("lin", [], pending=True)
    calls = []

    class Logged(torch.nn.Linear):
        def register_forward_pre_hook(self, hook, **kwargs):  # the program's override: llmpdb never calls it
            calls.append(self.log)                            # (set after Module.__init__ returned)
            return super().register_forward_pre_hook(hook, **kwargs)

        def __init__(self):
            super().__init__(2, 2)
            self.log = "ready"

    try:
        logged = Logged()
        assert calls == []
        # copy.copy shares the hook dicts, with llmpdb as without
        alias = copy.copy(logged)
        assert alias._forward_pre_hooks is logged._forward_pre_hooks
        # a bare module given its forward on the instance is a root like any other
        root = torch.nn.Module()
        root.lin = torch.nn.Linear(2, 2)
        root.forward = lambda x: root.lin(x)
        with torch.no_grad():
            root(torch.ones(1, 2))
    finally:
        engine.clear()
    # Module.__init__ run again on a live module (a reset) gives it new hook dicts: still watched
    engine.add("lin", [], pending=True)
    reset = torch.nn.Module()
    torch.nn.Module.__init__(reset)
    reset.lin = torch.nn.Linear(2, 2)
    reset.forward = lambda x: reset.lin(x)
    try:
        with torch.no_grad():
            reset(torch.ones(1, 2))
    finally:
        engine.clear()
    assert [(code, module) for code, module, _ in recorder.stops] == [
        ("Linear.forward", root.lin), ("Linear.forward", reset.lin)]


def test_a_model_compiled_while_a_breakpoint_is_pending_is_looked_at_and_warned_about():
    engine = ModuleBreakpointEngine(Recorder())
    bp = engine.add("blocks.1", [], pending=True)
    model = plain_model()
    compiled = torch.compile(model, backend="eager")
    try:
        with torch.no_grad():
            compiled(torch.tensor([[1, 2]]))
        messages = engine.take_messages()
    finally:
        engine.clear()
        torch._dynamo.reset()
    assert not bp.pending and bp.labels == {id(model.blocks[1]): "blocks.1"}
    assert messages[0].startswith("module breakpoint 1: blocks.1 was pending; armed on blocks.1")
    assert "runs under torch.compile" in messages[1]
