"""Tests of the navigation commands through a real llmpdb debugger (tests/transcript.py)."""

from __future__ import annotations

import inspect
import re

import torch

from llmpdb.commands.navigation import render_stop_header, user_root
from llmpdb.forward.breakpoints import module_breakpoints
from tiny_models import plain_model, tiny_llama
from transcript import after, debug_transcript

PREFILL = torch.tensor([[1, 2, 3, 4, 5, 6, 7]])


def _flat(text: str) -> str:
    """The text with its wrapping undone (messages wrap to the width at spaces)."""
    return " ".join(text.split())


def run_generate():
    model = tiny_llama()
    breakpoint()
    with torch.no_grad():
        return model.generate(PREFILL, max_new_tokens=2, do_sample=False)


def test_stack_model_inside_a_decoder_layer():
    out = debug_transcript(run_generate, ["c", "bm model.layers.1 --once", "c", "sm", "sm --all", "up", "up",
                                          "stack-model", "c"], width=140)
    stop = after(out, 2)
    assert stop.startswith("module breakpoint 1: model.layers.1 (LlamaDecoderLayer), hit 1 (once: now removed)\n")
    header = ("path: eval, no_grad, generate(), no labels, cache DynamicCache len 7, attn sdpa "
              "| model.layers.1 (LlamaDecoderLayer)")
    assert stop.endswith(header + "\n")  # the stop note
    table = after(out, 3).splitlines()
    assert table[0] == header
    assert table[1].split() == ["#", "module", "/", "code", "class", "at", "first", "tensor"]
    modules = [line for line in table if "modeling_llama.py" in line]
    assert [re.split(r"\s{2,}", line.strip())[1:3] for line in modules] == [
        ["(root)", "LlamaForCausalLM"], ["model", "LlamaModel"], ["model.layers.1", "LlamaDecoderLayer"]]
    assert modules[-1].startswith(">#") and modules[-1].endswith("hidden_states (1, 7, 64) f32")
    assert "run_generate()" in after(out, 3) and "_call_impl" not in after(out, 3)
    assert re.search(r"plumbing frames hidden: stack-model --all shows them\)\n$", after(out, 3))
    everything = after(out, 4)
    assert "_call_impl()" in everything and "generate()" in everything and "wrapped_func()" in everything
    numbers = [int(n) for n in re.findall(r"^ *>?#(\d+) ", everything, re.M)]
    assert numbers == list(range(len(numbers)))  # pdb's frame numbers, every frame
    moved = after(out, 7)  # after two `up`s the current frame is plumbing: shown, header follows it
    assert moved.startswith("path: eval, no_grad, generate(), no labels, cache DynamicCache len 7, attn sdpa "
                            "| model (LlamaModel)")
    assert re.search(r"^>#\d+  forward_with_checkpointing\(\)", moved, re.M)


def test_model_command_shows_sets_and_resets_the_root():
    out = debug_transcript(run_generate, ["c", "root-model", "root-model model.model", "root-model",
                                          "model --auto", "root-model 3", "c"])
    # the prefix is the command's documented name, root-model, also when typed as `model` (issue #10)
    assert after(out, 1) == "root-model: LlamaForCausalLM (found among the current frame's variables)\n"
    assert after(out, 2) == "root-model: model.model = LlamaModel; names are relative to LlamaModel\n"
    assert after(out, 3) == "root-model: LlamaModel (set with `root-model model.model`)\n"
    assert after(out, 4) == "root-model: automatic (the outermost module on the stack)\n"
    assert after(out, 5) == "*** root-model: 3 is a int, not a module (no named_modules/forward)\n"
    assert user_root() is None


def test_break_module_arguments_and_listing():
    out = debug_transcript(run_generate, [
        "c", "bm", "bm --once", "bm lm_head when x", "bm lm_head if", "bm lm_head if x >", "bm --after",
        "bm x --after two", "bm x --after -1", "bm layers.*.mlp if x.shape[1] > 1 --after 1",
        "bm model.model.layers.0.self_attn --once", "bm", "clear-module", "clear-module 9", "clear-module x",
        "clear-module 1", "clear-module all", "c"], width=120)
    assert after(out, 1) == "no module breakpoints (break-module PATTERN sets one)\n"
    assert after(out, 2) == "*** break-module: a PATTERN is required (usage: break-module PATTERN [if CONDITION] ...)\n"
    assert after(out, 3) == ("*** break-module: unexpected 'when x' (usage: break-module PATTERN [if CONDITION] "
                             "[--after N] [--once])\n")
    assert after(out, 4) == "*** break-module: 'if' needs a condition\n"
    assert after(out, 5) == "*** break-module: invalid condition 'x >': invalid syntax\n"
    # (a pattern matching nothing is no longer an error but a pending breakpoint, issue #10:
    # test_a_pattern_matching_nothing_is_pending_and_says_what_is_near)
    assert after(out, 6).startswith("*** break-module: --after needs a value")
    assert after(out, 7) == ("*** break-module: bad value for --after: 'two': needs a whole number from 0 to 1000000000 "
                               "(usage: break-module [PATTERN [if CONDITION] [--after N] [--once]])\n")
    assert after(out, 8) == ("*** break-module: bad value for --after: '-1': needs a whole number from 0 to 1000000000 "
                               "(usage: break-module [PATTERN [if CONDITION] [--after N] [--once]])\n")
    assert after(out, 9) == ("module breakpoint 1: layers.*.mlp if x.shape[1] > 1, after 1 -> "
                             "model.layers.0.mlp, model.layers.1.mlp\n")
    # `model` is the variable the root is bound to: model.model.layers.0 means model.layers.0 from the root
    assert after(out, 10) == ("module breakpoint 2: model.model.layers.0.self_attn, once -> "
                              "model.layers.0.self_attn\n")
    listing = after(out, 11).splitlines()
    assert [re.split(r"\s{2,}", line.strip()) for line in listing] == [
        ["num", "pattern", "condition", "after", "once", "armed on", "calls", "hits", "stops"],
        ["1", "layers.*.mlp", "x.shape[1] > 1", "1", "2 modules", "0", "0", "0"],
        ["2", "model.model.layers.0.self_attn", "yes", "model.layers.0.self_attn", "0", "0", "0"]]
    assert listing[1].index("x.shape") == listing[0].index("condition")  # aligned columns
    assert after(out, 12) == "*** clear-module: usage: clear-module N|all\n"
    assert after(out, 13) == "*** clear-module: no module breakpoint 9 (have: 1, 2)\n"
    assert after(out, 14) == "*** clear-module: not a breakpoint number: 'x' (usage: clear-module N|all)\n"
    assert after(out, 15) == "cleared module breakpoint 1: layers.*.mlp\n"
    assert after(out, 16) == "cleared 1 module breakpoint\n"
    assert module_breakpoints().breakpoints() == []


def run_plain_with_counts():
    model = plain_model()
    breakpoint()
    with torch.no_grad():
        _, past = model(torch.tensor([[1, 2, 3]]))
        for token in (4, 5):
            _, past = model(torch.tensor([[token]]), past)
    return past


def test_hit_counts_across_steps_and_break_listing():
    out = debug_transcript(run_plain_with_counts, [
        "c", "bm PlainAttention if x.shape[1] == 1 --after 2", "c", "p x.shape, past[0].shape", "bm", "c"])
    stop = after(out, 2)
    assert stop.startswith("module breakpoint 1: blocks.0 (PlainAttention), hit 3, if x.shape[1] == 1\n")
    assert "path: eval, no_grad, cache tuple len 4 | blocks.0 (PlainAttention)" in stop
    assert after(out, 3) == "(torch.Size([1, 1, 32]), torch.Size([1, 4, 4, 8]))\n"
    listing = after(out, 4).splitlines()
    assert listing[1].split() == ["1", "PlainAttention", "x.shape[1]", "==", "1", "2", "2", "modules", "5", "3", "1"]


def run_no_model_yet():
    breakpoint()
    model = plain_model(layers=1)
    with torch.no_grad():
        model(torch.tensor([[1, 2]]))


def test_class_pattern_before_the_model_exists():
    # (`bm blocks.0` here is now pending, issue #10: test_path_pattern_before_the_model_exists_is_pending)
    out = debug_transcript(run_no_model_yet, ["c", "bm PlainAttention --once", "c", "p x.shape", "c"])
    assert _flat(after(out, 1)) == _flat("module breakpoint 1: PlainAttention, once -> no module yet: armed on "
                                         "PlainAttention modules as they are created\n")
    assert after(out, 2).startswith("module breakpoint 1: blocks.0 (PlainAttention), hit 1 (once: now removed)\n")
    assert after(out, 3) == "torch.Size([1, 2, 32])\n"


def _def_line(func) -> int:
    lines, start = inspect.getsourcelines(inspect.unwrap(func))
    return start + next(i for i, line in enumerate(lines) if line.lstrip().startswith("def "))


def test_where_forward(monkeypatch):
    from transformers import LlamaForCausalLM, LlamaModel

    path = inspect.getsourcefile(LlamaForCausalLM)
    top, inner = _def_line(LlamaForCausalLM.forward), _def_line(LlamaModel.forward)
    monkeypatch.setenv("EDITOR", "myeditor")
    out = debug_transcript(run_generate, ["c", "wf", "wf model.model", "where-forward torch.compile(model)",
                                          "wf model.model --edit", "wf 3", "c"])
    assert _flat(after(out, 1)) == _flat(f"LlamaForCausalLM.forward {path}:{top} (through deprecate_kwarg, "
                                         "can_return_tuple)")
    assert _flat(after(out, 2)) == _flat(f"LlamaModel.forward {path}:{inner} (through deprecate_kwarg, "
                                         "merge_with_config_defaults, capture_outputs)")
    assert _flat(after(out, 3)) == _flat("OptimizedModule (forward has no Python source: a compiled wrapper)\n"
                                         f"  -> _orig_mod (torch.compile): LlamaForCausalLM.forward  {path}:{top}  "
                                         "(through deprecate_kwarg, can_return_tuple)")
    assert after(out, 4).endswith(f"\nmyeditor +{inner} {path}\n")
    assert after(out, 5) == "*** where-forward: not a module: int (no named_modules/forward)\n"


def test_help_is_usage_first_and_stop_header_helper():
    out = debug_transcript(run_generate, ["help stack-model", "help bm", "help clear-module", "help wf", "c", "c"])
    firsts = [after(out, i).splitlines()[0] for i in range(4)]
    assert firsts == ["stack-model [--all]", "break-module [PATTERN [if CONDITION] [--after N] [--once]]",
                      "clear-module N|all", "where-forward [EXPR] [--edit]"]
    import sys

    assert render_stop_header(sys._getframe()) is None and render_stop_header(None) is None


def test_forward_location_through_instance_forward_wrappers_and_classes():
    import functools

    from llmpdb.inspect.forward_location import forward_location
    from llmpdb.render.modules import render_forward_location
    from tiny_models import PlainAttention, PlainLM

    model = plain_model()
    block = model.blocks[0]
    original = block.forward

    def new_forward(module, *args, **kwargs):  # accelerate's add_hook_to_module does this
        return original(*args, **kwargs)

    block.forward = functools.update_wrapper(functools.partial(new_forward, block), original)
    location = forward_location(block)
    path = inspect.getsourcefile(PlainAttention)
    line = _def_line(PlainAttention.forward)
    assert render_forward_location(location) == (
        f"PlainAttention.forward  {path}:{line}  (forward set on the instance; through partial(new_forward))")
    assert forward_location(PlainLM).final.lineno == _def_line(PlainLM.forward)

    class DDPLike(torch.nn.Module):
        def __init__(self, module):
            super().__init__()
            self.module = module

        def forward(self, *args):
            return self.module(*args)

    text = render_forward_location(forward_location(DDPLike(model)), edit=True, editor="code -g")
    lines = text.splitlines()
    assert lines[0].startswith("test_forward_location_through_instance_forward_wrappers_and_classes.<locals>"
                               ".DDPLike.forward  ")
    assert lines[1] == f"  -> module (DDP): PlainLM.forward  {path}:{_def_line(PlainLM.forward)}"
    assert lines[2] == f"code -g +{_def_line(PlainLM.forward)} {path}"


def test_a_pattern_matching_nothing_is_pending_and_says_what_is_near():
    out = debug_transcript(run_generate, ["c", "bm self_atn", "bm model.layers.9.mlp", "c"])
    assert _flat(after(out, 1)) == _flat("module breakpoint 1: self_atn -> no module yet: armed on self_atn modules "
                                         "as they are created (nothing matches in LlamaForCausalLM now; near: "
                                         "self_attn, model.layers.1.self_attn, model.layers.0.self_attn)")
    assert _flat(after(out, 2)).startswith("module breakpoint 2: model.layers.9.mlp -> pending: arms on the first "
                                           "new model whose forward runs (nothing matches in LlamaForCausalLM now; "
                                           "near: ")
    assert [bp.pending for bp in module_breakpoints().breakpoints()] == [True, True]


def test_a_regex_looking_pattern_is_told_patterns_are_globs():
    out = debug_transcript(run_generate, ["c", "bm LlamaMLP|LlamaAttention", "bm layers.0.mlp", "c"])
    assert after(out, 1).rstrip().endswith("; patterns are globs (* ? [..]), not regular expressions")
    assert "globs" not in after(out, 2)  # a pattern that matched says nothing of the kind


def test_path_pattern_before_the_model_exists_is_pending():
    out = debug_transcript(run_no_model_yet, ["c", "bm blocks.0 --once", "b", "bm", "c", "p x.shape", "bm", "c"])
    assert after(out, 1) == ("module breakpoint 1: blocks.0, once -> pending: arms on the first model whose "
                             "forward runs\n")
    for listing in (after(out, 2), after(out, 3)):   # `b` lists it beside pdb's breakpoints, as `bm` does
        row = [line for line in listing.splitlines() if "blocks.0" in line]
        assert len(row) == 1 and row[0].split() == ["1", "blocks.0", "yes", "pending", "0", "0", "0"], listing
    stop = after(out, 4)
    assert stop.startswith("module breakpoint 1: blocks.0 (PlainAttention), hit 1 (once: now removed)\n")
    assert "llmpdb: module breakpoint 1: blocks.0 was pending; armed on blocks.0 when PlainLM's forward ran" in stop
    assert after(out, 5) == "torch.Size([1, 2, 32])\n"
    assert after(out, 6) == "no module breakpoints (break-module PATTERN sets one)\n"


def run_two_models():
    student = plain_model(layers=1)
    breakpoint()
    teacher = tiny_llama()
    with torch.no_grad():
        student(torch.tensor([[1, 2]]))
        return teacher(PREFILL).logits.shape


def test_a_class_of_a_model_built_later_and_a_typo_are_pending():
    out = debug_transcript(run_two_models, ["c", "bm LlamaMLP --once", "bm self_atn", "bm", "c",
                                            "p type(self).__name__", "c"])
    assert _flat(after(out, 1)) == _flat("module breakpoint 1: LlamaMLP, once -> no module yet: armed on LlamaMLP "
                                         "modules as they are created (nothing matches in PlainLM now)")
    assert _flat(after(out, 2)) == _flat("module breakpoint 2: self_atn -> no module yet: armed on self_atn modules "
                                         "as they are created (nothing matches in PlainLM now)")
    rows = [line.split() for line in after(out, 3).splitlines()[1:]]
    assert [row[-4] for row in rows] == ["pending", "pending"]
    assert after(out, 4).startswith("module breakpoint 1: model.layers.0.mlp (LlamaMLP), hit 1 (once: now removed)\n")
    assert after(out, 5) == "'LlamaMLP'\n"
