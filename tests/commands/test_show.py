"""`show` under a real llmpdb debugger: the causal mask of a tiny Llama (eager attention, dtype-minimum
masking) and its attention weights draw the triangle, torch.tril too; NaN and -inf get their own glyphs;
large tensors are block-averaged to the width; 1-d tensors and --hist draw histograms whose counts are
checked here in plain Python; grad mode and RNG are left alone; one clear error per bad input."""

from __future__ import annotations

import math

import torch
from tiny_models import tiny_llama
from transcript import debug_transcript, outputs_of

from llmpdb.render.heatmap import RAMP
from llmpdb.render.style import visible_len

SEEN: dict = {}


def _grid_rows(text: str) -> list[str]:
    """The cells of each drawn row: what lies between the two '|'."""
    return [line.split("|")[1] for line in text.splitlines() if line.count("|") == 2]


def _llama_forward(ids):
    model = tiny_llama(attn_implementation="eager")
    breakpoint()
    outputs = model(ids, output_attentions=True)
    attn = outputs.attentions[0]
    breakpoint()
    return outputs


def test_show_the_causal_mask_inside_a_tiny_llama_attention():
    ids = torch.tensor([[1, 5, 9, 3, 2, 7]])
    out = debug_transcript(_llama_forward, ["c", "bm layers.0.self_attn", "c", "show attention_mask[0, 0]",
                                            "clear-module all", "c", "show attn[0, 1]", "c"], ids)
    chunks = outputs_of(out)
    mask = chunks[2]
    rows = _grid_rows(mask)
    assert len(rows) == 6
    for i, row in enumerate(rows):
        assert row == RAMP[-1] * (i + 1) + "x" * (5 - i)  # attended 0s, then the masked dtype minimum
    assert mask.splitlines()[0].startswith("attention_mask[0, 0]  f32 (6, 6)  values 0 … 0")
    assert "'x' -inf or the dtype's minimum (15)" in mask
    weights = _grid_rows(chunks[5])
    for i, row in enumerate(weights):  # softmax weights: positive up to the diagonal, exactly 0 after it
        assert row[: i + 1].count(" ") == 0 and row[i + 1:] == " " * (5 - i), (i, row)
    assert weights[0][0] == RAMP[-1]  # row 0 attends only to itself: weight 1, the maximum


def test_show_tril_rows_have_i_plus_1_filled_cells_and_labels():
    def stop():
        mask = torch.tril(torch.ones(12, 12, dtype=torch.bool))
        breakpoint()
        return mask

    chunk = outputs_of(debug_transcript(stop, ["c", "show mask", "c"]))[0]
    rows = _grid_rows(chunk)
    assert [row.count(RAMP[-1]) for row in rows] == list(range(1, 13))
    assert [row.count(" ") for row in rows] == list(range(11, -1, -1))
    labels = [line.split("|")[0].strip() for line in chunk.splitlines() if line.count("|") == 2]
    assert labels == [str(i) for i in range(12)]
    assert chunk.splitlines()[1].split() == ["0", "11"]


def test_show_nan_and_inf_are_distinct_and_a_large_tensor_fits_the_width():
    def stop():
        x = torch.zeros(5, 5)
        x[1, 2] = float("nan")
        x[3, 3] = float("inf")
        x[4, 0] = float("-inf")
        x[0, 4] = 2.0
        big = torch.arange(200 * 300, dtype=torch.float32).reshape(200, 300)
        breakpoint()
        return x, big

    chunks = outputs_of(debug_transcript(stop, ["c", "show x", "show big", "c"], width=80))
    rows = _grid_rows(chunks[0])
    assert rows[1][2] == "?" and rows[3][3] == "^" and rows[4][0] == "x" and rows[0][4] == RAMP[-1]
    assert rows[2] == " " * 5
    assert "'?' NaN (1)" in chunks[0] and "'^' +inf (1)" in chunks[0]
    big = chunks[1]
    for line in big.splitlines()[1:]:
        assert visible_len(line) <= 80, line
    drawn = _grid_rows(big)
    assert len(drawn) < 200 and len(drawn[0]) < 300
    block = f"{math.ceil(200 / len(drawn))}×{math.ceil(300 / len(drawn[0]))}"
    assert f"(each cell the mean of up to {block} values)" in big.splitlines()[:2]
    # values grow along each row and down the rows: the first cell is the minimum, the last the maximum
    assert drawn[0][0] == " " and drawn[-1][-1] == RAMP[-1]
    labels = [line.split("|")[0].strip() for line in big.splitlines() if line.count("|") == 2]
    assert labels[0].startswith("0-") and labels[-1].endswith("-199")


def test_show_histogram_counts_match_a_plain_count():
    def stop():
        torch.manual_seed(3)
        v = torch.randn(500)
        v[7] = float("nan")
        scores = torch.randn(4, 50)
        SEEN.update(v=v, scores=scores)
        breakpoint()
        return v

    chunks = outputs_of(debug_transcript(stop, ["c", "show v", "show scores --hist --bins 4", "c"]))
    for text, name, bins in ((chunks[0], "v", 10), (chunks[1], "scores", 4)):
        values = [x for x in SEEN[name].flatten().tolist() if x == x]
        low, high = min(values), max(values)
        expected = [0] * bins
        for x in values:
            expected[min(bins - 1, int((x - low) / (high - low) * bins))] += 1
        bars = text.splitlines()[1:]
        counts = [int(line.split()[2]) for line in bars]
        assert sum(counts) == len(values)
        assert all(abs(a - b) <= 1 for a, b in zip(counts, expected)), (counts, expected)  # float edges
        assert len(bars) == bins
    assert "499 finite values in 10 bins; not counted: NaN 1" in chunks[0].splitlines()[0]


def test_show_leaves_grad_mode_rng_and_the_tensor_alone():
    def stop():
        w = torch.randn(6, 6, requires_grad=True)
        y = w * 2
        state = torch.get_rng_state()
        breakpoint()
        return torch.equal(state, torch.get_rng_state()), torch.is_grad_enabled(), y.grad_fn, w.grad

    results = []

    def run():
        results.append(stop())

    chunks = outputs_of(debug_transcript(run, ["c", "show y", "show y --hist", "c"]))
    assert _grid_rows(chunks[0]) and "bins" in chunks[1]
    same_rng, grad_mode, grad_fn, grad = results[0]
    assert same_rng and grad_mode and type(grad_fn).__name__ == "MulBackward0" and grad is None


def test_show_errors():
    def stop():
        m = torch.empty(4, 4, device="meta")
        q = torch.zeros(2, 3, 4, 5)
        s = torch.tensor(1.5)
        c = torch.zeros(3, 3, dtype=torch.complex64)
        e = torch.zeros(0, 3)
        n = [1, 2]
        breakpoint()
        return m

    chunks = outputs_of(debug_transcript(stop, ["c", "show m", "show q", "show s", "show c", "show e", "show n",
                                                "show", "show q --bins 0", "show q --color", "show undefined_name",
                                                "p s.item()", "c"]))
    assert chunks[0] == "*** show: m is a meta tensor (4, 4): it has no values to draw"
    assert chunks[1] == ("*** show: q is 4-d (2, 3, 4, 5): show a 2-d slice, e.g. show q[0, 0] "
                         "(or --hist for the values of all of it)")
    assert chunks[2] == "*** show: s is a 0-d tensor (one value): p s.item()"
    assert chunks[3] == "*** show: c is c64: show c.abs() or c.real"
    assert chunks[4] == "*** show: e is empty (0, 3): nothing to draw"
    assert chunks[5] == "*** show: n is not a tensor (a list): show draws tensors"
    assert chunks[6] == "*** show: an expression is required (usage: show EXPR [--hist] [--bins N])"
    assert chunks[7] == "*** show: bad value for --bins: '0': needs a whole number from 1 to 1000 (usage: show EXPR [--hist] [--bins N])"
    assert chunks[8] == "*** show: unknown option --color (usage: show EXPR [--hist] [--bins N])"
    assert chunks[9].startswith("*** show: ") and "undefined_name" in chunks[9] and "\n" not in chunks[9]
    assert chunks[10].strip() == "1.5"
