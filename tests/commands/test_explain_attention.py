"""`explain` on ``F.scaled_dot_product_attention`` and ``torch.einsum`` mismatches in real torch calls:
the operands by name with their shapes and the dims that disagree (heads, head_dim, the mask's key length,
an einsum subscript, an operand with fewer dims than its subscripts); ``enable_gqa=True`` allows heads that
divide."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transcript import debug_transcript, outputs_of
from transcript import explained as _explained



def explained_lines(func, *args):
    return _explained(func, *args).splitlines()


def attend(q, k, v, mask=None):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def scores(q, k):
    return torch.einsum("bhqd,bhkd->bhqk", q, k)


def test_sdpa_heads_head_dim_and_mask_mismatches():
    z = torch.zeros
    heads = explained_lines(attend, z(1, 4, 7, 16), z(1, 2, 7, 16), z(1, 2, 7, 16))
    assert heads[1].startswith("scaled_dot_product_attention: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)"
                               "   at test_explain_attention.py:")
    assert heads[2].split() == ["q", "(1,", "4,", "7,", "16)"] and heads[4].split() == ["k", "(1,", "2,", "7,", "16)"]
    assert heads[-1] == "  mismatch: q dim 1 (4) vs k dim 1 (2) (query and key batch/heads dims broadcast)"
    head_dim = explained_lines(attend, z(1, 4, 7, 16), z(1, 4, 7, 8), z(1, 4, 7, 16))
    assert head_dim[-1] == "  mismatch: q dim 3 (16) vs k dim 3 (8) (query and key must share the last dim, E)"
    mask = explained_lines(attend, z(1, 4, 7, 16), z(1, 4, 9, 16), z(1, 4, 9, 16), z(1, 1, 7, 7))
    assert mask[-1] == ("  mismatch: mask dim 3 (7) vs k dim 2 (9) (the mask broadcasts to (…, L, S): query's L, "
                        "key's S)")


def gqa_stop(q, k, v):
    breakpoint()
    return q, k, v


def test_sdpa_enable_gqa_allows_heads_that_divide():
    z = torch.zeros
    out = outputs_of(debug_transcript(gqa_stop, [
        "c", "explain F.scaled_dot_product_attention(q, k, v, enable_gqa=True)",
        "explain F.scaled_dot_product_attention(q, k, v)", "c"], z(1, 4, 7, 16), z(1, 2, 7, 16), z(1, 2, 7, 16),
        width=200))
    assert "mismatch" not in out[0]
    assert out[1].splitlines()[-1] == ("  mismatch: q dim 1 (4) vs k dim 1 (2) (query and key batch/heads dims "
                                       "broadcast)")


def test_einsum_subscript_and_rank_mismatches():
    z = torch.zeros
    sizes = explained_lines(scores, z(1, 4, 7, 16), z(1, 2, 7, 16))
    assert sizes[1].startswith("einsum: torch.einsum('bhqd,bhkd->bhqk', q, k)   at test_explain_attention.py:")
    assert sizes[-1] == "  mismatch: q dim 1 (4) vs k dim 1 (2) (both are 'h' in 'bhqd,bhkd->bhqk')"
    rank = explained_lines(scores, z(1, 4, 7, 16), z(1, 4, 7))
    assert rank[-1] == "  mismatch: k has 3 dims (1, 4, 7), 'bhkd' of 'bhqd,bhkd->bhqk' names 4"
