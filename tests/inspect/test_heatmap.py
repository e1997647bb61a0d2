"""inspect.heatmap on real tensors: block means, masked / NaN / +inf cells, histograms, what is refused."""

from __future__ import annotations

import pytest
import torch

from llmpdb.inspect.heatmap import MASKED, NAN, POSINF, check_drawable, heat_grid, value_histogram


def test_block_means_and_edges():
    x = torch.arange(16, dtype=torch.float32).reshape(4, 4)
    grid = heat_grid(x, rows=2, cols=2)
    assert grid.row_edges == (0, 2, 4) and grid.col_edges == (0, 2, 4)
    expected = [[x[r:r + 2, c:c + 2].mean().item() for c in (0, 2)] for r in (0, 2)]
    assert [list(row) for row in grid.cells] == expected
    assert (grid.low, grid.high) == (expected[0][0], expected[1][1])
    same = heat_grid(x, rows=10, cols=10)
    assert [list(row) for row in same.cells] == x.tolist()


def test_special_values_and_partly_masked_blocks():
    x = torch.zeros(2, 4, dtype=torch.bfloat16)
    x[0, 0] = float("nan")
    x[0, 2:] = torch.finfo(torch.bfloat16).min
    x[1, 2] = float("-inf")
    x[1, 3] = 3.0
    x[1, 0] = float("inf")
    grid = heat_grid(x, rows=2, cols=4)
    assert grid.cells[0] == (NAN, 0.0, MASKED, MASKED)
    assert grid.cells[1] == (POSINF, 0.0, MASKED, 3.0)
    assert (grid.masked, grid.nan, grid.posinf) == (3, 1, 1)
    halves = heat_grid(x, rows=1, cols=2)
    assert halves.cells == ((NAN, 3.0),)  # the right block: one unmasked value, 3


def test_bool_and_int_tensors_count_as_numbers():
    grid = heat_grid(torch.eye(3, dtype=torch.bool), rows=3, cols=3)
    assert [list(r) for r in grid.cells] == torch.eye(3).tolist() and grid.masked == 0
    ints = heat_grid(torch.tensor([[2**40, -5]]), rows=1, cols=2)
    assert ints.cells == ((float(2**40), -5.0),)


def test_histogram_counts_and_a_constant_tensor():
    x = torch.tensor([0.0, 1.0, 1.0, 2.0, 4.0, float("nan"), float("-inf")])
    hist = value_histogram(x, bins=4)
    assert hist.edges == (0.0, 1.0, 2.0, 3.0, 4.0) and hist.counts == (1, 2, 1, 1)
    assert (hist.total, hist.nan, hist.masked) == (5, 1, 1)
    flat = value_histogram(torch.full((3, 3), 7), bins=5)
    assert flat.edges == (7.0, 7.0) and flat.counts == (9,)


def test_values_are_read_without_grad_and_without_touching_the_tensor():
    w = torch.randn(4, 4, requires_grad=True)
    y = w * 3
    grid = heat_grid(y, rows=4, cols=4)
    assert torch.is_grad_enabled() and y.grad_fn is not None and w.grad is None
    assert [list(r) for r in grid.cells] == y.detach().tolist()


@pytest.mark.parametrize("value, message", [
    (torch.empty(2, 2, device="meta"), "x is a meta tensor (2, 2): it has no values to draw"),
    (torch.zeros(2, 2, 2), "x is 3-d (2, 2, 2): show a 2-d slice, e.g. show x[0] (or --hist for the values of all of it)"),
    (torch.tensor(3), "x is a 0-d tensor (one value): p x.item()"),
    (torch.zeros(2, 2).to_sparse(), "x is a sparse_coo tensor: show x.to_dense()"),
    ([1, 2], "x is not a tensor (a list): show draws tensors"),
    (torch.quantize_per_tensor(torch.ones(4), 0.1, 0, torch.qint8), "x is quantized qi8: show x.dequantize()"),
    (torch.nested.nested_tensor([torch.ones(2, 3), torch.ones(4, 3)]),
     "x is a nested tensor (ragged): show x[0], or show torch.nested.to_padded_tensor(x, 0.0)"),
    (torch.ones(2, 2, dtype=torch.complex64), "x is c64: show x.abs() or x.real"),
])
def test_refused_with_one_line(value, message):
    with pytest.raises(ValueError) as info:
        check_drawable(value, "x")
    assert str(info.value) == message
