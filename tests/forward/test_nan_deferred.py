"""`nan-break --blocks` as it runs on a GPU: each block's check stays on its device and the checks are read
together at the end of the model's forward. Driven on the CPU with ``defer_on_cpu`` (the same code path a
CUDA tensor takes); the host reads are counted with the torch profiler, as the syncs on a GPU would be."""

from __future__ import annotations

import re

import pytest
import torch
from tiny_models import tiny_llama
from torch.profiler import ProfilerActivity, profile

from llmpdb.forward import nan_deferred
from llmpdb.forward.nan_break import NanBreak
from llmpdb.forward.nan_deferred import device_sum


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64,
                                   torch.complex64, torch.complex128, torch.float8_e5m2])
def test_device_sum_is_finite_exactly_when_every_value_is_even_at_the_largest_values(dtype):
    real = {torch.complex64: torch.float32, torch.complex128: torch.float64}.get(dtype, dtype)
    big = torch.full((4096,), torch.finfo(real).max, dtype=torch.float64).to(dtype)
    if dtype is not torch.float8_e5m2:  # no isfinite kernel for float8
        assert torch.isfinite(big).all()
    assert device_sum(big).dtype is torch.float64 and device_sum(big).dim() == 0
    assert torch.isfinite(device_sum(big)), "a sum of finite values overflowed: a false stop"
    for bad in (float("nan"), float("inf"), float("-inf")):
        holed = big.clone()
        holed[2049] = bad
        assert not torch.isfinite(device_sum(holed)), (dtype, bad)


def reads_in(run) -> int:
    """Host reads of a tensor's value (`.item()`, `bool(t)`): on CUDA each one waits for the device."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run()
    return sum(e.count for e in prof.key_averages() if e.key == "aten::_local_scalar_dense")


def armed(model, *, blocks, deferred, stops):
    engine = NanBreak(lambda frame, header: stops.append((frame, header)))
    engine.defer_on_cpu = deferred
    engine.arm(roots=[model], blocks=blocks)
    return engine


def deferred_llama():
    """A tiny Llama with `nan-break --blocks` armed as on a GPU: (model, ids, stops, engine)."""
    torch.manual_seed(0)
    model = tiny_llama()
    stops: list = []
    return model, torch.randint(3, 200, (1, 7)), stops, armed(model, blocks=True, deferred=True, stops=stops)


def test_deferred_block_checks_read_once_per_forward_where_reading_at_once_reads_each_block():
    torch.manual_seed(0)
    model = tiny_llama()
    ids = torch.randint(3, 200, (1, 7))

    def forward():
        with torch.no_grad():
            model(ids)

    stops: list = []
    counts = {}
    for label, blocks, deferred in (("every module", False, False), ("blocks, at once", True, False),
                                    ("blocks, deferred", True, True)):
        engine = armed(model, blocks=blocks, deferred=deferred, stops=stops)
        forward()  # warm: the first forward builds the rotary cache
        engine.checked = 0
        counts[label] = (reads_in(forward), engine.checked)
        engine.disarm()
    assert reads_in(forward) == 0
    assert stops == []
    assert counts["blocks, deferred"] == (1, 7), counts
    assert counts["blocks, at once"] == (7, 7), counts
    assert counts["every module"][0] == counts["every module"][1] > 7, counts


def test_deferred_generate_reads_once_per_step():
    torch.manual_seed(0)
    model = tiny_llama()
    ids = torch.randint(3, 200, (1, 5))
    stops: list = []

    def generate():
        model.generate(ids, max_new_tokens=4, min_new_tokens=4, do_sample=False)

    generate()
    plain = reads_in(generate)  # generate reads values itself (stopping criteria)
    engine = armed(model, blocks=True, deferred=True, stops=stops)
    reads = reads_in(generate)
    engine.disarm()
    assert stops == []
    assert reads - plain == 4, (reads, plain)  # four forwards: the prompt, then a token each but the last


HEADER = re.compile(r"""nan-break: model\.layers\.1 \(LlamaDecoderLayer\) output is not finite \[\(1, 7, 64\) f32\]
  the first of the 8 blocks checked whose output is not finite,
  found at the end of the LlamaForCausalLM forward: the block checks are read together,
  once per forward \(one host sync per device\);
  inside it, non-finite values already in:
  model\.layers\.1\.mlp\.down_proj\.weight holds 1 NaN, 0 Inf of 8192
  stopped in torch's module call of the LlamaForCausalLM: `self` is the model, `result` its output;
  `up` for the caller; now checking the 12 modules inside model\.layers\.1 only:
  `c` stops at the first of them with a NaN/Inf in the block's next call \(`nan-break off`\)""")


def test_a_deferred_hit_stops_at_the_end_of_the_forward_naming_the_first_bad_block_then_the_module():
    model, ids, stops, engine = deferred_llama()
    with torch.no_grad():
        model.model.layers[1].mlp.down_proj.weight[0, 0] = float("nan")
        out = model(ids)
    assert not torch.isfinite(out.logits).all()  # the program's result is untouched by the check
    [(frame, header)] = stops
    assert HEADER.fullmatch(header), header
    assert frame.f_locals["self"] is model and frame.f_code.co_filename.endswith("module.py")
    stops.clear()
    with torch.no_grad():
        model(ids)
    [(frame, header)] = stops
    assert header.startswith("nan-break: model.layers.1.mlp.down_proj (Linear) output has 7 NaN, 0 Inf of 448 "
                             "values [(1, 7, 64) f32]\n"), header
    assert frame.f_locals["self"] is model.model.layers[1].mlp.down_proj
    assert not engine.armed


def test_a_bad_leaf_block_turns_the_checks_off_and_a_submodel_called_alone_is_still_read(monkeypatch):
    monkeypatch.setattr(nan_deferred, "LIMIT", 12)
    model, ids, stops, engine = deferred_llama()
    with torch.no_grad():
        for _ in range(3):  # the inner model alone: its hook is not the last of a forward; 6 checks each
            model.model(ids)
        assert stops == [] and len(engine.deferred.pending) == 6 and engine.deferred.reads == 1
        model.lm_head.weight[3, 3] = float("inf")
        model(ids)
    [(frame, header)] = stops
    assert header.splitlines()[0] == "nan-break: lm_head (Linear) output is not finite [(1, 7, 256) f32]", header
    assert header.endswith("`up` for the caller; nan-break is now off"), header
    assert frame.f_locals["self"] is model
    assert not engine.armed
