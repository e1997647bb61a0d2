"""``contraction_ops`` against torch itself: for each einsum / scaled_dot_product_attention case, a
mismatch is found exactly when torch raises (einsum), and points at the dims that disagree."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from llmpdb.inspect.contraction_ops import einsum_mismatch, sdpa_mismatch

EINSUM = [
    ("bhqd,bhkd->bhqk", [(1, 4, 7, 16), (1, 2, 7, 16)]),
    ("bhqd,bhkd->bhqk", [(1, 4, 7, 16), (1, 1, 7, 16)]),
    ("bhqd,bhkd->bhqk", [(1, 4, 7, 16), (1, 4, 7)]),
    ("...qd,...kd->...qk", [(2, 4, 7, 16), (3, 4, 7, 16)]),
    ("...qd,...kd->...qk", [(2, 4, 7, 16), (4, 7, 16)]),
    ("...qd,...kd->...qk", [(2, 4, 7, 16), (4, 7, 8)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("ij,jk", [(2, 3), (4, 5)]),
]


@pytest.mark.parametrize("equation,shapes", EINSUM)
def test_einsum_mismatch_is_found_exactly_when_torch_raises(equation, shapes):
    try:
        torch.einsum(equation, *[torch.zeros(s) for s in shapes])
        raised = False
    except RuntimeError:
        raised = True
    found = einsum_mismatch(equation, shapes)
    assert (found is not None) == raised, found


def test_einsum_ellipsis_points_at_the_dims_that_do_not_broadcast():
    m = einsum_mismatch("...qd,...kd->...qk", [(2, 4, 7, 16), (3, 4, 7, 16)])
    assert (m.a, m.dim_a, m.b, m.dim_b, m.size_a, m.size_b) == (0, 0, 1, 0, 2, 3)


SDPA = [
    ((1, 4, 7, 16), (1, 2, 7, 16), (1, 2, 7, 16), None),
    ((1, 4, 7, 16), (1, 4, 7, 8), (1, 4, 7, 16), None),
    ((1, 4, 7, 16), (1, 4, 9, 16), (1, 4, 9, 16), (1, 1, 7, 7)),
    ((1, 4, 7, 16), (1, 4, 9, 16), (1, 4, 9, 16), (1, 1, 7, 9)),
    ((2, 4, 7, 16), (2, 4, 9, 16), (2, 4, 9, 32), (7, 9)),
]


@pytest.mark.parametrize("q,k,v,mask", SDPA)
def test_sdpa_mismatch_is_found_when_torch_raises(q, k, v, mask):
    try:
        F.scaled_dot_product_attention(torch.zeros(q), torch.zeros(k), torch.zeros(v),
                                       attn_mask=None if mask is None else torch.zeros(mask))
        raised = False
    except RuntimeError:
        raised = True
    assert (sdpa_mismatch(q, k, v, mask) is not None) == raised
