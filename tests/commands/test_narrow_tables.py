"""``mem``, ``show`` and ``shapes`` lines fit terminal widths 40 and 60: columns drop or shorten, long names and
notes are cut in the middle or wrapped (issue #10)."""

from __future__ import annotations

import pytest
import torch
from tiny_models import tiny_llama
from transcript import debug_transcript

PROMPT = "(llmpdb) "


def narrow_stop():
    model = tiny_llama()
    a_rather_long_variable_name_for_the_hidden_states = torch.randn(2, 8, 64)
    planned = torch.empty(4, 4, device="meta")
    breakpoint()
    return model, a_rather_long_variable_name_for_the_hidden_states, planned


@pytest.mark.parametrize("width", [40, 60])
def test_mem_show_and_shapes_fit_narrow_widths(width):
    out = debug_transcript(narrow_stop, [
        "c", "mem", "show a_rather_long_variable_name_for_the_hidden_states --hist",
        "show model.model.layers[0].self_attn.q_proj.weight --hist", "show model.lm_head.weight", "shapes", "c",
    ], width=width)
    replies = out.split(PROMPT)[2:-1]
    assert len(replies) == 5
    text = "\n".join(replies)
    too_long = [line for line in text.split("\n") if len(line) > width]
    assert too_long == []
    assert "largest tensors" in replies[0] and "CUDA: not in use" in replies[0]
    assert "finite values in 10 bins" in " ".join(replies[1].split())


def cjk_stop():
    d = {"注意力": torch.randn(2, 3), "attention_weights": torch.ones(4, 5)}
    breakpoint()
    return d


def _cells(text: str) -> int:
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


@pytest.mark.parametrize("width", [40, 100])
def test_wide_characters_are_measured_in_display_cells(width):
    out = debug_transcript(cjk_stop, ["c", "shapes", "mem", "c"], width=width)
    shapes, mem = out.split(PROMPT)[2:4]
    for block in (shapes, mem):
        lines = block.rstrip("\n").split("\n")
        assert all(_cells(line) <= width for line in lines), lines
        table = [line for line in lines if line.startswith(("path", "d["))]
        assert len(table) == 3
        starts = {_cells(line[:line.index("(")]) for line in table[1:]}  # where the shape column begins
        assert starts == {_cells(table[0][:table[0].index("shape")])}, table


def test_visible_len_and_ellipsize_count_cells():
    from llmpdb.render.style import visible_len
    from llmpdb.render.table import ellipsize

    assert visible_len("注意力") == 6 and visible_len("\x1b[1ma\x1b[0m") == 1 and visible_len("é") == 1
    cut = ellipsize("注意力权重矩阵的名字", 9)
    assert visible_len(cut) <= 9 and cut.startswith("注意") and cut.endswith("名字")
