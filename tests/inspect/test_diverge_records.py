"""compare_tensors and default_tolerance on real tensors: NaN/Inf rules, shapes, integers, mixed dtypes."""

from __future__ import annotations

import math

import torch

from llmpdb.inspect.diverge_records import TOLERANCES, compare_tensors, default_tolerance


def test_default_tolerance_takes_the_looser_dtype_and_is_exact_for_integers():
    assert default_tolerance(torch.float32, torch.bfloat16) == TOLERANCES["bf16"]
    assert default_tolerance(torch.float16, torch.float32) == TOLERANCES["f16"]
    assert default_tolerance(torch.float64, torch.float64) == TOLERANCES["f64"]
    assert default_tolerance(torch.int64, torch.int64) == (0.0, 0.0)


def test_errors_are_the_largest_absolute_and_relative_differences_against_the_first_run():
    a = torch.tensor([1.0, 2.0, -4.0, 0.5])
    b = torch.tensor([1.0, 2.5, -4.0, 0.25])
    d = compare_tensors("output", a, b, rtol=0.0, atol=0.3)
    assert d.max_abs == 0.5 and d.max_rel == 0.5     # |2.5-2| = 0.5; |0.25-0.5| / 0.5 = 0.5
    assert d.beyond and d.count == 1 and d.numel == 4   # only 0.5 > 0.3
    assert not compare_tensors("output", a, b, rtol=0.0, atol=0.5).beyond


def test_nan_in_both_runs_is_equal_in_one_run_is_a_difference():
    a = torch.tensor([1.0, math.nan, math.inf])
    same = compare_tensors("o", a, a.clone())
    assert not same.beyond and same.max_abs == 0
    one = compare_tensors("o", a, torch.tensor([1.0, 2.0, math.inf]))
    assert one.beyond and one.max_abs == math.inf and one.note == "1 NaN in one run only"
    signs = compare_tensors("o", a, torch.tensor([1.0, math.nan, -math.inf]))
    assert signs.beyond and signs.count == 1


def test_shapes_integers_and_bf16_against_f32():
    assert compare_tensors("o", torch.zeros(2, 3), torch.zeros(3, 2)).note == "shape (2, 3) vs (3, 2)"
    ids = torch.arange(6)
    assert not compare_tensors("ids", ids, ids.clone()).beyond
    assert compare_tensors("ids", ids, ids + (ids == 3)).count == 1   # integers compare exactly
    x = torch.randn(64, generator=torch.Generator().manual_seed(0))
    d = compare_tensors("o", x, x.to(torch.bfloat16))
    assert 0 < d.max_rel <= 2 ** -8 and not d.beyond    # bf16 rounding: at most half an ulp of 8 bits
