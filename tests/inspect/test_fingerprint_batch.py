"""Batched fingerprints of small tensors give what the one-tensor path gives: sums, counts, the same samples."""

from __future__ import annotations

import math

import pytest
import torch

import llmpdb.inspect.fingerprint as fingerprint


def _tensors():
    torch.manual_seed(0)
    transposed = torch.randn(3, 4).t()  # not contiguous
    poisoned = torch.randn(300)
    poisoned[[3, 77]] = float("nan")
    poisoned[100] = -float("inf")
    return [torch.randn(64, 64), torch.randn(64), transposed, poisoned, torch.tensor(2.5), torch.arange(10),
            torch.randn(5, 7, dtype=torch.bfloat16), torch.randn(2, 3, dtype=torch.complex64), torch.empty(0),
            torch.empty(2, device="meta"), torch.full((40000,), 0.5)]


def _same(a, b) -> bool:
    return all(x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(a, b)) and len(a) == len(b)


def test_batched_fingerprints_match_the_one_tensor_path(monkeypatch):
    tensors = _tensors()
    batched = fingerprint.fingerprints(tensors)
    monkeypatch.setattr(fingerprint, "SMALL", -1)  # every tensor on its own
    alone = fingerprint.fingerprints(tensors)
    assert [type(x) for x in batched] == [type(x) for x in alone]
    for got, want, t in zip(batched, alone, tensors):
        if isinstance(want, str):
            assert got == want
            continue
        assert got[2:4] == want[2:4], t.shape  # NaN and Inf counts exact
        assert _same(got[4], want[4]), t.shape  # the very same sampled values
        assert got[0] == pytest.approx(want[0], rel=1e-12, abs=1e-9)
        assert got[1] == pytest.approx(want[1], rel=1e-12)
    assert batched[3][2:4] == (2, 1)  # the poisoned tensor, counted one by one after its batch's NaN sum
    assert len(batched[0][4]) == fingerprint.SAMPLES and len(batched[4][4]) == 1


def test_a_batch_holds_at_most_batch_elements():
    runs = fingerprint._batches([fingerprint.BATCH // 2, fingerprint.BATCH // 2, 1, fingerprint.BATCH])
    assert runs == [(0, 2), (2, 3), (3, 4)]


def test_a_batch_layout_is_made_once_and_reused_with_the_same_answer_and_the_cache_is_bounded(monkeypatch):
    import llmpdb.inspect.fingerprint_batch as batch

    monkeypatch.setattr(batch, "_LAYOUTS", {})
    tensors = _tensors()
    first = fingerprint.fingerprints(tensors)
    layouts = dict(batch._LAYOUTS)
    assert layouts, "no batch was laid out"
    again = fingerprint.fingerprints(tensors)
    assert batch._LAYOUTS.keys() == layouts.keys()
    assert all(batch._LAYOUTS[key] is value for key, value in layouts.items())  # nothing laid out again
    for a, b in zip(first, again):
        assert a == b if isinstance(a, str) else _same(a[:4], b[:4]) and _same(a[4], b[4])
    other = [torch.randn(n) for n in (5, 6, 7)]
    want = fingerprint.fingerprints(other)
    monkeypatch.setattr(batch, "_LAYOUT_ELEMENTS", 1)  # every new layout starts the cache over
    monkeypatch.setattr(batch, "_LAYOUTS", {})
    assert [w[:4] for w in fingerprint.fingerprints(other)] == [w[:4] for w in want]
    assert len(batch._LAYOUTS) == 1
    fingerprint.fingerprints([torch.randn(9)])
    assert list(batch._LAYOUTS) == [("cpu", (9,), fingerprint.SAMPLES)]
