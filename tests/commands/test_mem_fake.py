"""`mem` and `shapes` on fake and functional tensors (issue #21): a ``FakeTensor`` (``FakeTensorMode``) or
a ``FunctionalTensor`` holds no memory, so it counts 0 B with a label, like a meta tensor, and llmpdb never
calls its deprecated ``data_ptr``/``untyped_storage`` (no warning is raised, even with warnings as errors);
a model whose parameters are fake holds 0 B. Under a real llmpdb debugger (transcript)."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn
from transcript import debug_transcript, outputs_of

from llmpdb.inspect.memory import largest_tensors, model_holdings

fake_tensor = pytest.importorskip("torch._subclasses.fake_tensor")


def _fakes():
    mode = fake_tensor.FakeTensorMode()
    with mode:
        fake = torch.empty(10, 3)
        fake_view = fake.view(3, 10)
        fake_model = nn.Linear(4, 8)
    return mode, fake, fake_view, fake_model


def fake_stop():
    mode, fake, fake_view, fake_model = _fakes()
    real = torch.ones(4)
    breakpoint()
    return real


def test_mem_counts_fake_tensors_as_zero_bytes_with_a_label_and_never_warns():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = debug_transcript(fake_stop, ["c", "mem", "shapes fake", "shapes", "c"], width=120)
    chunks = outputs_of(out)
    assert [str(w.message)[:80] for w in caught] == []  # FakeTensor.data_ptr warns: never called
    rows = {line.split()[0]: line for line in chunks[0].splitlines() if line.split()}
    # the fake tensor's storage is listed once, under whichever path the walk reaches it first (the local
    # `fake`, or the mode's memo of it): 0 B with the label
    fake_rows = [line.split() for line in chunks[0].splitlines() if line.split()[1:3] == ["(10,", "3)"]]
    assert len(fake_rows) == 1, chunks[0]
    assert fake_rows[0][0] in ("fake", "mode.fake_tensor_converter.meta_converter.tensor_memo[0]"), chunks[0]
    assert fake_rows[0][3:] == ["f32", "cpu", "0", "B", "(fake)"], chunks[0]
    assert "fake_view" not in rows, chunks[0]  # the same storage as `fake`: counted once
    assert rows["real"].rstrip().endswith("16 B")
    assert "16 B in all" in chunks[0]  # only the real tensor is memory
    model_row = next(line for line in chunks[0].splitlines() if "fake_model (Linear)" in line)
    assert " 0 B " in model_row and "(+2 fake)" in model_row
    # shapes: the logical size with the flag, and the total leaves fake tensors out
    assert "fake" in chunks[1].splitlines()[1] and "120 B" in chunks[1].splitlines()[1]
    assert chunks[1].splitlines()[-1].startswith("1 tensor, 0 B total (+ 120 B fake, not allocated)")
    assert "16 B total" in chunks[2]


def test_largest_tensors_reads_no_storage_of_a_fake_tensor_with_warnings_as_errors():
    mode, fake, fake_view, fake_model = _fakes()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows, storages, total, notes = largest_tensors({"fake": fake, "view": fake_view, "real": torch.ones(2)})
        held = model_holdings([("fake_model", fake_model)])
    assert total == 8 and {r.path: r.nbytes for r in rows} == {"fake": 0, "view": 0, "real": 8}
    assert {r.path: r.label for r in rows if r.nbytes == 0} == {"fake": "fake", "view": "fake"}
    assert held[0].nbytes == 0 and "(+2 fake)" in held[0].detail


def test_functional_tensors_count_zero_bytes():
    functional = pytest.importorskip("torch._subclasses.functional_tensor")
    with functional.FunctionalTensorMode():
        wrapped = torch.ones(4)
    assert type(wrapped).__name__ == "FunctionalTensor"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows, storages, total, notes = largest_tensors({"wrapped": wrapped})
    assert total == 0 and rows[0].label == "functional"
