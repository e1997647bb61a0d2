"""A breakpoint armed on a model must not change what the program does with that model: save it whole,
pickle it, deep-copy it, copy it (real tiny Llama, real torch.save / pickle / copy)."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys
import textwrap

import torch
from tiny_models import tiny_llama

from llmpdb.forward.breakpoints import ModuleBreakpointEngine
from llmpdb.forward.guest_hook import INERT_EVENT, GuestHook, drop_guest_hooks
from llmpdb.forward.nan_break import NanBreak

IDS = torch.tensor([[1, 2, 3, 4]])


def _never_stop(frame, header):
    raise AssertionError(f"no stop expected: {header}")


def armed_llama():
    """A tiny Llama with a breakpoint armed on ``model.layers.1.self_attn`` whose condition never holds:
    ``(model, engine, bp, the armed module)``; the caller clears the engine."""
    model = tiny_llama().eval()
    engine = ModuleBreakpointEngine(_never_stop)
    bp = engine.add("model.layers.1.self_attn", [model], condition="hidden_states.shape[1] < 0")
    return model, engine, bp, model.model.layers[1].self_attn


def hooks(module) -> list:
    return list(module._forward_pre_hooks.values()) + list(module._forward_hooks.values())


def test_a_model_armed_with_bm_saves_whole_and_loads_without_llmpdb(tmp_path):
    model, engine, bp, _ = armed_llama()
    try:
        path = tmp_path / "whole.pt"
        torch.save(model, path)  # raised PicklingError: the engine's hook function cannot be pickled
        pickle.dumps(model)
        with torch.no_grad():
            expected = model(IDS).logits
        assert bp.calls == 1
    finally:
        engine.clear()
    # a fresh interpreter without llmpdb on its path loads it and gets the same logits
    script = textwrap.dedent(f"""
        import sys, torch
        sys.path = [p for p in sys.path if "llmpdb" not in p and p not in ("", ".")]
        events = []
        sys.addaudithook(lambda event, args: events.append(event) if event == {INERT_EVENT!r} else None)
        model = torch.load({str(path)!r}, weights_only=False)
        assert "llmpdb" not in sys.modules
        with torch.no_grad():
            logits = model(torch.tensor([[1, 2, 3, 4]])).logits
        print(logits.flatten()[:5].tolist(), len(events))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr[-2000:]
    values, events = out.stdout.rsplit(" ", 1)
    assert eval(values) == expected.flatten()[:5].tolist()  # noqa: S307 (a list of floats we printed)
    assert int(events) == 1  # the inert stand-in ran once, for the one armed module, and did nothing else


def test_a_deep_copy_made_while_armed_keeps_no_hook_and_never_counts():
    model, engine, bp, armed = armed_llama()
    try:
        twin = copy.deepcopy(model)  # an EMA or reference model made after `bm`
        copied = twin.model.layers[1].self_attn
        assert [type(h) for h in hooks(copied)] == [GuestHook] and hooks(copied)[0] is hooks(armed)[0]
        with torch.no_grad():
            twin(IDS)
        assert hooks(copied) == [] and copied._forward_pre_hooks_with_kwargs == {}  # it left at its first call
        assert bp.calls == 0  # the copy is not the armed module
        with torch.no_grad():
            model(IDS)
        assert bp.calls == 1 and len(hooks(armed)) == 1
    finally:
        engine.clear()
    assert hooks(armed) == [] and hooks(copied) == []


def test_a_shallow_copy_shares_the_hook_dicts_and_leaves_the_breakpoint_armed():
    model, engine, bp, armed = armed_llama()
    try:
        alias = copy.copy(armed)  # the same hook dicts: removing the hook there would disarm the original
        assert alias._forward_pre_hooks is armed._forward_pre_hooks
        alias(hidden_states=torch.zeros(1, 2, 64), position_embeddings=(torch.ones(1, 2, 16), torch.zeros(1, 2, 16)),
              attention_mask=None)
        assert len(hooks(armed)) == 1
        with torch.no_grad():
            model(IDS)
        assert bp.calls == 1
    finally:
        engine.clear()


def test_nan_break_blocks_armed_model_pickles_and_its_copy_is_not_checked():
    model = tiny_llama().eval()
    stops = []
    engine = NanBreak(lambda frame, header: stops.append(header))
    engine.arm(roots=[model], blocks=True)
    try:
        with torch.no_grad():
            model(IDS)  # finite: no stop
        assert engine.blocks > 0 and stops == []
        clone = pickle.loads(pickle.dumps(model))
        twin = copy.deepcopy(model)
        with torch.no_grad():
            twin.model.layers[1].mlp.down_proj.weight[0, 0] = float("nan")
            twin(IDS)  # the copy's blocks carry the hook in their dicts; it leaves, checks nothing
        assert stops == []
        assert not any(isinstance(h, GuestHook) for m in twin.modules() for h in hooks(m))
        inert = [h for m in clone.modules() for h in hooks(m)]
        assert len(inert) == engine.blocks and all(h.args == (INERT_EVENT,) for h in inert)  # stand-ins only
        with torch.no_grad():
            model.model.layers[1].mlp.down_proj.weight[0, 0] = float("nan")
            model(IDS)
        assert len(stops) == 1 and "model.layers.1 (LlamaDecoderLayer)" in stops[0]
    finally:
        engine.disarm()
    assert not any(hooks(m) for m in model.modules())


def test_drop_guest_hooks_leaves_llmpdbs_hooks_out_of_the_state_and_the_module_untouched():
    model = tiny_llama().eval()
    armed = model.model.layers[1].self_attn
    own = armed.register_forward_pre_hook(print, with_kwargs=True)  # the program's own hook stays, first
    engine = ModuleBreakpointEngine(_never_stop)
    engine.add("model.layers.1.self_attn", [model], condition="hidden_states.shape[1] < 0")
    try:
        state = armed.__getstate__()
        drop_guest_hooks(state)
        assert list(state["_forward_pre_hooks"].values()) == [print]
        assert list(state["_forward_pre_hooks_with_kwargs"]) == [own.id]
        assert [type(h) for h in armed._forward_pre_hooks.values()] == [type(print), GuestHook]  # untouched
    finally:
        engine.clear()
        own.remove()
