"""`nan-break` under a real llmpdb debugger: a NaN in layer 2 of a tiny Llama, a NaN gradient, off, errors."""

from __future__ import annotations

import contextlib
import re

import pytest
import torch
import torch.nn.modules.module as torch_module
from tiny_models import tiny_llama
from transcript import debug_transcript, outputs_of

from llmpdb.forward.nan_break import bad_values, nan_breaks
from llmpdb.session import SESSION


@pytest.fixture(autouse=True)
def fresh_session():
    SESSION.reset()
    yield
    nan_breaks().disarm()
    SESSION.reset()


def forward(model):
    ids = torch.arange(3, 10).unsqueeze(0)
    breakpoint()
    out = model(ids)
    breakpoint()
    return out


def forward_backward(model):
    ids = torch.arange(3, 10).unsqueeze(0)
    breakpoint()
    out = model(ids)
    out.logits.sum().backward()
    breakpoint()
    return out


class SqrtOfZero(torch.nn.Module):
    """A finite output (0) whose gradient is NaN: d sqrt(u)/du at u = 0 is inf, times du/dx = 0."""

    def forward(self, x):
        return torch.sqrt(x * 0)


def test_nan_break_stops_in_the_module_whose_output_has_the_nan():
    model = tiny_llama(num_hidden_layers=3)
    with torch.no_grad():
        model.model.layers[2].mlp.down_proj.weight[0, 0] = float("nan")
    commands = ["c", "nan-break", "c", "p type(self).__name__, tuple(result.shape)", "c", "c"]
    chunks = outputs_of(debug_transcript(forward, commands, model))
    assert chunks[0].startswith("nan-break: checking module outputs; pauses at the first NaN/Inf")
    stop = chunks[1].splitlines()
    assert all(len(line) <= 100 for line in stop if not line.startswith("[")), stop  # (pdb: the location)
    assert stop[:2] == ["nan-break: model.layers.2.mlp.down_proj (Linear) output has 7 NaN, 0 Inf of 448 values",
                        "  [(1, 7, 64) f32]"]
    assert stop[2] == "  stopped in torch's module call: `self` is the module, `result` its output;"
    assert stop[3] == "  `up` for the caller; nan-break is now off"
    assert chunks[2] == "('Linear', (1, 7, 64))"
    assert "-> return out" in chunks[3]  # off after the first hit: no stop in the enclosing modules
    assert not torch_module._global_forward_hooks


def test_nan_break_grad_stops_at_the_first_nan_gradient():
    model = tiny_llama()
    model.model.layers[1].mlp.act_fn = SqrtOfZero()
    commands = ["c", "nan-break --grad", "c", "c", "c"]
    chunks = outputs_of(debug_transcript(forward_backward, commands, model))
    assert chunks[0].startswith("nan-break: checking output gradients; pauses")
    header = " ".join(line.strip() for line in chunks[1].split("\n  stopped")[0].splitlines())
    assert header == ("nan-break: model.layers.1.mlp.gate_proj (Linear) grad of output has 896 NaN, 0 Inf of 896 "
                      "values [(1, 7, 128) f32]")
    assert "stopped in the frame running backward()" in chunks[1]
    assert "-> breakpoint()" in chunks[2] or "-> return out" in chunks[2]
    assert not torch_module._global_forward_hooks


def test_nan_break_finite_model_never_stops_and_off_removes_the_hook():
    model = tiny_llama()
    commands = ["c", "nan-break", "c", "nan-break off", "nan-break off", "nan-break --bogus", "nan-break now", "c"]
    chunks = outputs_of(debug_transcript(forward, commands, model))
    assert "-> return out" in chunks[1] and "nan-break:" not in chunks[1]
    assert nan_breaks().checked >= 30  # every module call of the forward was checked
    assert chunks[2] == "nan-break: off"
    assert chunks[3] == "nan-break: was not armed"
    assert chunks[4].startswith("*** nan-break: unknown option --bogus")
    assert chunks[5] == "*** nan-break: unexpected 'now' (usage: nan-break [--blocks] [--grad] [off])"
    assert not torch_module._global_forward_hooks


def test_bad_values_counts_and_skips_integers():
    assert bad_values(torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])) == "1 NaN, 2 Inf of 4"
    assert bad_values(torch.ones(3)) is None
    assert bad_values(torch.ones(3, dtype=torch.long)) is None
    assert bad_values(torch.empty(2, 2, device="meta")) is None


class ReturnsChild(torch.nn.Module):
    """Returns its child's output as is (``inplace=False``) or after writing a NaN into it in place."""

    def __init__(self, inplace: bool):
        super().__init__()
        self.inner, self.inplace = torch.nn.Linear(4, 4), inplace

    def forward(self, x):
        y = self.inner(x)
        if self.inplace:
            y[0, 0] = float("nan")
        return y


def test_nan_break_skips_an_unchanged_child_output_but_checks_one_changed_in_place():
    from llmpdb.forward.nan_break import NanBreak
    hits = []
    engine = NanBreak(lambda frame, header: hits.append((frame.f_locals.get("self"), header)))
    finite, poisoned = ReturnsChild(False), ReturnsChild(True)
    engine.arm(roots=[finite])
    with torch.no_grad():
        finite(torch.ones(2, 4))
    assert engine.checked == 1 and not hits  # the parent returned the very tensor its child returned
    engine.disarm()
    engine.arm(roots=[poisoned])
    with torch.no_grad():
        poisoned(torch.ones(2, 4))
    assert len(hits) == 1 and hits[0][0] is poisoned  # written after the child's check: a new version
    assert hits[0][1].startswith("nan-break: (root ReturnsChild) (ReturnsChild) output has 1 NaN, 0 Inf of 8")
    assert not torch_module._global_forward_hooks


@pytest.mark.parametrize("blocks", [False, True])
def test_nan_break_folds_away_in_a_compiled_graph_without_graph_breaks(blocks):
    import torch._dynamo.utils as dynamo_utils
    from llmpdb.forward.nan_break import NanBreak
    torch._dynamo.reset()
    dynamo_utils.counters.clear()
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8))
    hits = []
    engine = NanBreak(lambda frame, header: hits.append(header))
    engine.arm(roots=[model], blocks=blocks)
    try:
        # torch's note for a global hook (not for the blocks' own): it fires for the OptimizedModule too
        with contextlib.nullcontext() if blocks else pytest.warns(UserWarning):
            torch.compile(model, backend="eager")(torch.ones(2, 8))
        assert not dynamo_utils.counters["graph_break"] and not engine.messages and not hits
        # folded away: nothing read inside the graph (a global hook reads the OptimizedModule's output)
        assert engine.checked == (0 if blocks else 1)
        poisoned = torch.ones(2, 8)
        poisoned[1, 1] = float("nan")
        model(poisoned)  # eager again: checked
        assert hits and hits[0].startswith("nan-break: 0 (Linear) output has 8 NaN")
    finally:
        engine.disarm()
        torch._dynamo.reset()


def forward_twice(model):
    ids = torch.arange(3, 10).unsqueeze(0)
    breakpoint()
    out = model(ids)
    out = model(ids)
    breakpoint()
    return out


def test_nan_break_blocks_stops_at_the_layer_then_inside_it_at_the_module():
    model = tiny_llama(num_hidden_layers=3)
    with torch.no_grad():
        model.model.layers[2].mlp.down_proj.weight[0, 0] = float("nan")
    commands = ["c", "nan-break --blocks", "c", "p type(self).__name__, tuple(result.shape)", "c",
                "p type(self).__name__", "c"]
    chunks = outputs_of(debug_transcript(forward_twice, commands, model))
    assert chunks[0] == ("nan-break: checking the outputs of 9 blocks; pauses at the first NaN/Inf,\n"
                         "  then checks inside that block (`nan-break off` to remove)")
    block_stop = chunks[1].split("\n[")[0].splitlines()
    assert block_stop == [
        "nan-break: model.layers.2 (LlamaDecoderLayer) output has 7 NaN, 0 Inf of 448 values [(1, 7, 64) f32]",
        "  the first of the 9 blocks checked whose output is not finite;",
        "  inside it, non-finite values already in:",
        "  model.layers.2.mlp.down_proj.weight holds 1 NaN, 0 Inf of 8192",
        "  stopped in torch's module call: `self` is the block, `result` its output;",
        "  `up` for the caller; now checking the 12 modules inside it only:",
        "  `c` stops at the first of them with a NaN/Inf in the block's next call (`nan-break off`)"]
    assert chunks[2] == "('LlamaDecoderLayer', (1, 7, 64))"
    # the second forward: the checks inside layers.2 find the module (the first forward's rest: no stop)
    assert chunks[3].startswith("nan-break: model.layers.2.mlp.down_proj (Linear) output has 7 NaN, 0 Inf of 448")
    assert "nan-break is now off" in chunks[3]
    assert chunks[4] == "'Linear'"
    assert "-> return out" in chunks[5]
    assert not nan_breaks().armed and not any(m._forward_hooks for m in model.modules())


def test_nan_break_blocks_grad_names_the_block_output_the_gradient_came_back_to():
    model = tiny_llama()
    model.model.layers[1].mlp.act_fn = SqrtOfZero()
    commands = ["c", "nan-break --blocks --grad", "c", "c"]
    chunks = outputs_of(debug_transcript(forward_backward, commands, model))
    assert chunks[0].startswith("nan-break: checking the output gradients of 8 blocks;")
    assert "then turns off" in chunks[0]
    header = " ".join(line.strip() for line in chunks[1].split("\n[")[0].splitlines())
    # the gradient is NaN from layers.1's backward on: the first block output it reaches is layers.0's
    assert header == ("nan-break: model.layers.0 (LlamaDecoderLayer) grad of output has 448 NaN, 0 Inf of 448 values "
                      "[(1, 7, 64) f32] (blocks are checked: the NaN/Inf came back from the modules after this one; "
                      "`nan-break --grad` without --blocks checks every module's) stopped in the frame running "
                      "backward(); nan-break is now off")
    assert not any(m._forward_hooks for m in model.modules())


def test_nan_break_blocks_with_no_model_in_sight_takes_the_first_module_called():
    from llmpdb.forward.nan_break import NanBreak
    hits = []
    engine = NanBreak(lambda frame, header: hits.append((frame.f_locals.get("self"), header)))
    engine.arm(blocks=True)
    assert engine.armed and engine.blocks == 0 and torch_module._global_forward_pre_hooks
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 4))
    try:
        with torch.no_grad():
            model(torch.ones(1, 4))
            assert not torch_module._global_forward_pre_hooks and not hits  # removed at the first call
            assert engine.blocks == 4  # the Sequential and its three items
            model[2].bias[1] = float("inf")
            model(torch.ones(1, 4))
        assert len(hits) == 1 and hits[0][0] is model[2]
        assert hits[0][1].startswith("nan-break: 2 (Linear) output has 0 NaN, 1 Inf of 4 values")
    finally:
        engine.disarm()
    assert not any(m._forward_hooks for m in model.modules())


def test_a_check_failing_at_every_call_keeps_five_messages_and_counts_the_rest():
    from llmpdb.commands.nan_break import nan_break_problems_note
    from llmpdb.forward.nan_break import NanBreak

    class Hostile(torch.Tensor):  # every torch function on it raises, the checks' too
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            raise RuntimeError("hostile tensor")

    class Emits(torch.nn.Module):
        def forward(self, x):
            return torch.Tensor._make_subclass(Hostile, x)

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), Emits())
    engine = nan_breaks()
    assert isinstance(engine, NanBreak)
    engine.stopper = lambda frame, header: pytest.fail(header)
    engine.arm(roots=[model])
    try:
        for _ in range(200):
            model(torch.ones(1, 2))
    finally:
        engine.disarm()
    assert len(engine.messages) == 5 and engine.failed == 400  # Emits' output, then Sequential's: the same
    lines = nan_break_problems_note(None, None)
    assert len(lines) == 6 and lines[-1] == "llmpdb: nan-break: 395 more checks failed before these", lines
    assert all(re.fullmatch(r"llmpdb: nan-break check failed in (Emits|Sequential): RuntimeError: hostile tensor",
                            line) for line in lines[:5]), lines
    assert nan_break_problems_note(None, None) == [] and engine.failed == 0
