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
