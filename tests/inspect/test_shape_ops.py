"""Shape arithmetic of ``inspect.shape_ops``, checked against what torch itself computes or raises."""

from __future__ import annotations

import pytest
import torch

from llmpdb.inspect.shape_ops import (apply_method, broadcast_mismatch, cat_mismatch, linear_mismatch,
                                      matmul_mismatch, view_mismatch)

METHODS = [
    ((1, 2, 7, 16), "transpose", (2, 3)), ((1, 2, 7, 16), "transpose", (-1, -2)), ((2, 3, 4), "permute", (2, 0, 1)),
    ((2, 3, 4), "permute", ((1, 2, 0),)), ((2, 3), "unsqueeze", (0,)), ((2, 3), "unsqueeze", (-1,)),
    ((2, 1, 3), "squeeze", (1,)), ((2, 1, 3, 1), "squeeze", ()), ((1, 7, 64), "view", (1, 7, -1, 16)),
    ((1, 7, 64), "reshape", ((1, 7, 4, 16),)), ((1, 2, 1, 5), "expand", (3, 1, 2, 4, 5)),
    ((2, 3, 4, 5), "flatten", (1, 2)), ((2, 3, 4), "flatten", ()), ((3, 4), "T", ()), ((2, 3, 4), "mT", ()),
    ((2, 3), "contiguous", ()),
]


@pytest.mark.parametrize("shape,method,args", METHODS)
def test_apply_method_agrees_with_torch(shape, method, args):
    t = torch.zeros(shape)
    real = getattr(t, method)(*args) if method not in ("T", "mT") else getattr(t, method)
    assert apply_method(shape, method, args) == tuple(real.shape)


def test_unknown_or_impossible_is_none():
    assert apply_method((1, 7, 64), "view", (1, 7, -1, 24)) is None  # 448 is not a multiple of 168
    assert apply_method((2, 3), "transpose", (0, 5)) is None
    assert apply_method((2, 3), "frobnicate", ()) is None
    assert apply_method(None, "view", (1,)) is None


def _raises(fn) -> bool:
    try:
        fn()
    except RuntimeError:
        return True
    return False


@pytest.mark.parametrize("a,b", [((1, 4, 7, 16), (1, 2, 16, 7)), ((2, 3), (4, 5)), ((3, 4), (4, 5)),
                                 ((5, 3, 4), (4, 2)), ((3,), (3, 2)), ((2, 1, 3, 4), (5, 4, 6))])
def test_matmul_mismatch_iff_torch_raises(a, b):
    found = matmul_mismatch(a, b)
    assert (found is not None) == _raises(lambda: torch.zeros(a) @ torch.zeros(b))
    if found is not None:
        assert found.size_a == a[found.dim_a] and found.size_b == b[found.dim_b]


def test_matmul_mismatch_names_the_heads_dim():
    found = matmul_mismatch((1, 4, 7, 16), (1, 2, 16, 7))
    assert (found.dim_a, found.dim_b, found.size_a, found.size_b) == (1, 1, 4, 2)


@pytest.mark.parametrize("shapes", [[(64,), (1, 3, 48)], [(4, 3), (2, 3)], [(4, 1), (1, 5)], [(3,), (2, 3)]])
def test_broadcast_mismatch_iff_torch_raises(shapes):
    found = broadcast_mismatch(shapes)
    assert (found is not None) == _raises(lambda: torch.zeros(shapes[0]) + torch.zeros(shapes[1]))


def test_cat_view_linear():
    found = cat_mismatch([(3, 4), (5, 4)], 1)
    assert (found.dim_a, found.size_a, found.size_b) == (0, 3, 5)
    assert cat_mismatch([(3, 4), (5, 4)], 0) is None
    assert cat_mismatch([(3, 4), (5,)], 0) == "operand 1 has 2 dims, operand 2 has 1"
    assert view_mismatch((3, 4), (2, 5)) == "12 elements do not fit (2, 5) = 10"
    assert view_mismatch((1, 7, 64), (1, 7, -1, 24)).startswith("448 elements are not divisible by 168")
    assert view_mismatch((1, 7, 64), (1, 7, -1, 16)) is None
    found = linear_mismatch((2, 16), (4, 32))
    assert (found.dim_a, found.size_a, found.size_b) == (1, 16, 32)
    assert linear_mismatch((2, 32), (4, 32)) is None


@pytest.mark.parametrize("keys", [(0,), (slice(None, 2),), (0, slice(1, None)), (Ellipsis, 0), (None, 1),
                                  (slice(None), None, Ellipsis, slice(None, None, 2)), (-1, -1)])
def test_index_shape_agrees_with_torch(keys):
    from llmpdb.inspect.shape_ops import index_shape

    t = torch.zeros(2, 3, 4)
    assert index_shape((2, 3, 4), keys) == tuple(t[keys].shape)
