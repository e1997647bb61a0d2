"""Tests of llmpdb.module_breakpoints (and inspect.module_match): where and when a module breakpoint stops."""

from __future__ import annotations

import sys

import pytest
import torch
from torch import nn

from llmpdb.inspect.module_match import NoModuleMatch, match_modules, near_names
from llmpdb.forward.breakpoints import ModuleBreakpointEngine, module_breakpoints
from llmpdb.session import SESSION
from tiny_models import PlainAttention, plain_model, tiny_llama
from transcript import debug_transcript

PREFILL = torch.tensor([[1, 2, 3, 4, 5, 6, 7]])


class Recorder:
    """A stopper that records what a debugger would see at the stop."""

    def __init__(self):
        self.stops = []

    def __call__(self, frame, header):
        local_map = frame.f_locals
        first = next((v for k, v in local_map.items() if isinstance(v, torch.Tensor)), None)
        self.stops.append({"code": frame.f_code.co_qualname, "self": local_map.get("self"), "header": header,
                           "locals": sorted(local_map),
                           "seq": None if first is None or first.dim() < 2 else first.shape[1]})


def generate(model, tokens=3):
    with torch.no_grad():
        return model.generate(PREFILL, max_new_tokens=tokens, do_sample=False)


def armed(module) -> int:
    return len(module._forward_pre_hooks)


def test_condition_stops_once_in_prefill_in_the_forward_frame():
    model = tiny_llama()
    recorder = Recorder()
    engine = ModuleBreakpointEngine(recorder)
    bp = engine.add("model.layers.1.self_attn", [model], condition="hidden_states.shape[1] > 1")
    try:
        generate(model)
    finally:
        engine.clear()
    assert len(recorder.stops) == 1
    stop = recorder.stops[0]
    assert stop["code"] == "LlamaAttention.forward" and stop["self"] is model.model.layers[1].self_attn
    assert {"hidden_states", "position_embeddings", "attention_mask", "cache"} <= set(stop["locals"])
    assert stop["seq"] == 7
    assert stop["header"] == ("module breakpoint 1: model.layers.1.self_attn (LlamaAttention), hit 1, "
                              "if hidden_states.shape[1] > 1")
    assert (bp.calls, bp.hits, bp.stops) == (3, 1, 1)  # hit counts across generate() steps
    assert sys.gettrace() is None and armed(model.model.layers[1].self_attn) == 0


def test_after_skips_hits_and_once_removes_itself():
    model = tiny_llama()
    recorder = Recorder()
    engine = ModuleBreakpointEngine(recorder)
    bp = engine.add("LlamaAttention", [model], after=2, once=True)
    assert sorted(bp.labels.values()) == ["model.layers.0.self_attn", "model.layers.1.self_attn"]
    generate(model)
    # calls: prefill layer 0, layer 1, then step 2 layer 0 <- the third call stops
    assert [(s["seq"], s["self"] is model.model.layers[0].self_attn) for s in recorder.stops] == [(1, True)]
    assert recorder.stops[0]["header"].endswith("hit 3 (once: now removed)")
    assert engine.breakpoints() == [] and armed(model.model.layers[0].self_attn) == 0
    assert bp.calls == 3 and bp.stops == 1


def test_only_matching_modules_get_a_hook_and_clear_removes_everything():
    model = tiny_llama()
    registration = torch.nn.modules.module._global_module_registration_hooks
    before = len(registration)
    engine = ModuleBreakpointEngine(Recorder())
    engine.add("layers.*.mlp", [model], condition="False")
    engine.add("model.layers.1.mlp", [model], condition="False")
    hooked = [name for name, m in model.named_modules() if armed(m)]
    assert hooked == ["model.layers.0.mlp", "model.layers.1.mlp"]
    assert armed(model.model.layers[1].mlp) == 1  # two breakpoints, one hook
    assert len(registration) == before + 1
    assert engine.remove(1).pattern == "layers.*.mlp"
    assert [name for name, m in model.named_modules() if armed(m)] == ["model.layers.1.mlp"]
    assert engine.clear() == 1
    assert not any(armed(m) for m in model.modules()) and len(registration) == before


def test_patterns_names_globs_classes_aliases_and_near_names():
    model = tiny_llama()

    def names(pattern, aliases=()):
        return sorted(m.label for m in match_modules(pattern, [model], aliases))

    assert names("model.layers.1.self_attn") == ["model.layers.1.self_attn"]
    assert names("layers.1.self_attn") == ["model.layers.1.self_attn"]  # a dotted suffix is enough
    assert names("*self_attn") == ["model.layers.0.self_attn", "model.layers.1.self_attn"]
    assert names("layers.*.mlp") == ["model.layers.0.mlp", "model.layers.1.mlp"]
    assert names("LlamaDecoderLayer") == ["model.layers.0", "model.layers.1"]
    assert names("*RMSNorm") == ["model.layers.0.input_layernorm", "model.layers.0.post_attention_layernorm",
                                 "model.layers.1.input_layernorm", "model.layers.1.post_attention_layernorm",
                                 "model.norm"]
    assert names("model.model.layers.1.self_attn") == []
    assert names("model.model.layers.1.self_attn", aliases=["model"]) == ["model.layers.1.self_attn"]
    assert names("model", aliases=["model"]) == ["model"]  # a real name wins over the alias
    assert near_names("model.layers.1.self_atn", [model])[:2] == ["model.layers.1.self_attn",
                                                                  "model.layers.0.self_attn"]
    plain = plain_model()
    assert sorted(m.label for m in match_modules("blocks.*", [plain])) == ["blocks.0", "blocks.1"]
    assert len(match_modules("blocks.**", [plain])) == 6  # ** crosses dots: qkv and out of each block
    assert sorted(m.label for m in match_modules("blocks.[!0]", [plain])) == ["blocks.1"]
    engine = ModuleBreakpointEngine(Recorder())
    with pytest.raises(NoModuleMatch) as info:
        engine.add("model.layers.1.self_atn", [model])
    assert str(info.value).startswith("no module matches 'model.layers.1.self_atn'; near: "
                                      "model.layers.1.self_attn, model.layers.0.self_attn")
    with pytest.raises(SyntaxError):
        engine.add("lm_head", [model], condition="x >")
    assert engine.breakpoints() == []


def test_positional_and_keyword_calls_plain_model():
    model = plain_model()
    recorder = Recorder()
    engine = ModuleBreakpointEngine(recorder)
    engine.add("blocks.0", [model], condition="past is not None and x.shape[1] == 1")
    with torch.no_grad():
        _, past = model(torch.tensor([[1, 2, 3]]))
        model(torch.tensor([[4]]), past)           # block(x, past) positionally
        model.blocks[0](x=torch.ones(1, 1, 32), past=past[0])   # by keyword
    engine.clear()
    assert [(s["code"], s["seq"]) for s in recorder.stops] == [("PlainAttention.forward", 1)] * 2
    assert all("past" in s["locals"] and "x" in s["locals"] for s in recorder.stops)


def test_modules_created_after_arming_are_found():
    model = plain_model()
    recorder = Recorder()
    engine = ModuleBreakpointEngine(recorder)
    engine.add("blocks.*", [model])
    model.blocks.append(PlainAttention())      # a new layer under the known model
    with torch.no_grad():
        model(torch.tensor([[1, 2]]))
    assert [s["header"].split(":")[1].split(" (")[0].strip() for s in recorder.stops] == [
        "blocks.0", "blocks.1", "blocks.2"]
    engine.clear()

    recorder.stops.clear()
    engine.add("PlainAttention", [], once=True)   # no model yet: armed as matching modules are created
    later = plain_model(layers=1)
    with torch.no_grad():
        later(torch.tensor([[1, 2]]))
    assert [s["self"] for s in recorder.stops] == [later.blocks[0]]
    assert recorder.stops[0]["header"].startswith("module breakpoint 2: blocks.0 (PlainAttention), hit 1")
    with pytest.raises(NoModuleMatch):
        engine.add("blocks.0", [])              # a name needs a model
    engine.clear()


def test_reregistering_known_layers_does_not_rematch():
    model = tiny_llama()  # LlamaModel.forward slices self.layers: a new ModuleList of the same layers
    engine = ModuleBreakpointEngine(Recorder())
    engine.add("lm_head", [model], condition="False")
    rematches = []
    original = engine.rematch
    engine.rematch = lambda: rematches.append(1) or original()
    generate(model, tokens=2)
    engine.clear()
    assert rematches == []


class Boom(nn.Module):
    def forward(self, x):
        return x


def test_trace_is_removed_when_the_forward_is_never_reached_and_other_tracers_survive():
    module = Boom()
    recorder = Recorder()
    engine = ModuleBreakpointEngine(recorder)
    engine.add("Boom", [module])

    def failing_hook(mod, args):
        raise RuntimeError("a later pre-hook fails")

    handle = module.register_forward_pre_hook(failing_hook)
    with pytest.raises(RuntimeError):
        module(torch.ones(1))
    handle.remove()
    assert sys.gettrace() is None and recorder.stops == []

    events = []

    def outer_tracer(frame, event, arg):
        events.append(frame.f_code.co_name)
        return None

    sys.settrace(outer_tracer)
    try:
        module(torch.ones(1))
        after = sys.gettrace()
    finally:
        sys.settrace(None)
    engine.clear()
    assert after is outer_tracer and len(recorder.stops) == 1
    assert "_wrapped_call_impl" in events  # the previous tracer kept seeing calls


def test_condition_that_raises_stops_and_says_why():
    module = Boom()
    recorder = Recorder()
    engine = ModuleBreakpointEngine(recorder)
    engine.add("Boom", [module], condition="missing_name > 1")
    module(torch.ones(1))
    engine.clear()
    assert recorder.stops[0]["header"].splitlines()[1] == (
        "  condition 'missing_name > 1' raised NameError: name 'missing_name' is not defined")


def run_generate():
    model = tiny_llama()
    breakpoint()
    return generate(model, tokens=2)


def test_real_debugger_lands_in_forward_with_arguments():
    module_breakpoints().clear()
    SESSION.reset()
    out = debug_transcript(run_generate, [
        "c", "break-module model.layers.1.self_attn if hidden_states.shape[1] > 1", "c",
        "p hidden_states.shape", "p type(self).__name__", "clear-module all", "c"])
    assert "module breakpoint 1: model.layers.1.self_attn if hidden_states.shape[1] > 1 -> " \
           "model.layers.1.self_attn" in " ".join(out.split())  # the message wraps to the width
    assert "module breakpoint 1: model.layers.1.self_attn (LlamaAttention), hit 1" in out
    assert "modeling_llama.py" in out and "forward()" in out
    assert "torch.Size([1, 7, 64])\n" in out and "'LlamaAttention'\n" in out
    assert ("path: eval, no_grad, generate(), no labels, cache DynamicCache len 7, attn sdpa "
            "| model.layers.1.self_attn (LlamaAttention)") in " ".join(out.split())
    assert out.count("module breakpoint 1: model.layers.1.self_attn (LlamaAttention)") == 1
    assert module_breakpoints().breakpoints() == []
    SESSION.reset()


def test_a_failing_stop_is_reported_and_the_program_goes_on(capsys):
    module = Boom()

    def broken_stopper(frame, header):
        raise RuntimeError("no terminal")

    engine = ModuleBreakpointEngine(broken_stopper)
    engine.add("Boom", [module])
    assert module(torch.ones(1)).tolist() == [1.0]  # the forward still ran
    engine.clear()
    assert engine.take_messages() == ["break-module stop failed: RuntimeError: no terminal (the program continues)"]
    assert engine.take_messages() == []
    assert capsys.readouterr().err == ""  # said at the next stop, through the debugger (a stop note)
    assert sys.gettrace() is None
