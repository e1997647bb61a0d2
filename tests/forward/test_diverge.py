"""RunRecorder / RunComparer on real modules: records kept once and freed as compared, an in-place change
after a call cannot alter its record, a forward that raises leaves no hook, a different call order stops."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from llmpdb.forward.diverge import RunComparer, RunRecorder, hooked_modules


class Chain(nn.Module):
    def __init__(self, fail: bool = False, swap: bool = False):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)
        self.fail, self.swap = fail, swap

    def forward(self, x):
        first, second = (self.b, self.a) if self.swap else (self.a, self.b)
        h = first(x)
        out = second(h)
        h.mul_(0)                  # in place, after b read it: the record of a's output must not change
        if self.fail:
            raise RuntimeError("boom")
        return out


def paths(model):
    return {id(m): name for name, m in model.named_modules()}


def hooks_of(model) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def test_records_share_an_output_reused_as_input_and_the_comparison_frees_them():
    model, x = Chain(), torch.randn(2, 8)
    first = RunRecorder(hooked_modules(model, paths(model)), budget=2**20)
    with torch.no_grad(), first.hooked():
        model(x)
    first.forget_sharing()
    # x once, a's output once (it is b's input too), b's output once: 3 tensors of 2 x 8 floats
    assert first.used == 3 * 2 * 8 * 4 and first.recorded == 3
    assert [r.path for r in first.records] == ["(root)", "a", "b"]
    twin = Chain()
    second = RunComparer(hooked_modules(twin, paths(twin)), first)
    with torch.no_grad(), second.hooked():
        twin(x)
    assert [r.path for r in second.rows] == ["a", "b", "(root)"]   # the order outputs were produced
    assert second.first is None and all(r.largest("abs") == 0 for r in second.rows)  # mul_ did not reach records
    assert all(r.inputs is None and r.outputs is None for r in first.records)
    assert hooks_of(model) == hooks_of(twin) == 0


def test_a_forward_that_raises_leaves_no_hook_and_a_swapped_call_order_is_a_structure_difference():
    model, x = Chain(), torch.randn(2, 8)
    first = RunRecorder(hooked_modules(model, paths(model)), budget=2**20)
    with torch.no_grad(), first.hooked():
        model(x)
    failing = Chain(fail=True)
    second = RunComparer(hooked_modules(failing, paths(failing)), first)
    with pytest.raises(RuntimeError, match="boom"), torch.no_grad(), second.hooked():
        failing(x)
    assert hooks_of(failing) == 0 and [r.path for r in second.rows] == ["a", "b"]
    first = RunRecorder(hooked_modules(model, paths(model)), budget=2**20)
    with torch.no_grad(), first.hooked():
        model(x)
    swapped = Chain(swap=True)
    third = RunComparer(hooked_modules(swapped, paths(swapped)), first)
    with torch.no_grad(), third.hooked():
        swapped(x)
    assert third.structure == "call 1 is a (Linear) in run 1 but b (Linear) in run 2"
    assert hooks_of(swapped) == 0
