"""A cut column keeps the table's width and tells its rows apart: where the usual middle cut makes two
cells read the same, the ``…`` moves to where they differ (at the same length) before any cell gets more
room; each shown cell matches only the cell it stands for."""

from __future__ import annotations

import pytest
import torch

from llmpdb.render.table import fit_columns
from llmpdb.render.tensors import cut_path, render_tensors
from llmpdb.inspect.tensors import frame_tensors


def matches(shown: str, full: str) -> bool:
    head, sep, tail = shown.partition("…")
    return shown == full or (bool(sep) and full.startswith(head) and full.endswith(tail)
                             and len(head) + len(tail) < len(full))


def bart_like_keys() -> list[str]:
    keys = []
    for side in ("encoder", "decoder"):
        for attn in ("self_attn", "encoder_attn") if side == "decoder" else ("self_attn",):
            for proj in ("k_proj", "v_proj", "q_proj", "out_proj"):
                keys += [f"prefixed['module.model.{side}.layers.0.{attn}.{proj}.{p}']" for p in ("weight", "bias")]
    return keys + ["out.cache.self_attention_cache.layers[0].keys", "out.cache.cross_attention_cache.layers[0].keys"]


@pytest.mark.parametrize("width", [80, 60])
def test_cut_paths_fit_and_each_names_one_row(width):
    keys = bart_like_keys()
    headers, rows, _ = fit_columns(["path", "shape"], [[k, "(2, 4, 3, 8)"] for k in keys], width,
                                   [("cut", "path", 24, cut_path), ("cut", "path", 12, cut_path)])
    shown = [row[0] for row in rows]
    assert max(len(s) for s in shown) + 2 + len("(2, 4, 3, 8)") <= width
    for cut, key in zip(shown, keys):
        assert [k for k in keys if matches(cut, k)] == [key], cut


def test_the_shapes_table_of_a_state_dict_fits_80_columns():
    sd = {key: torch.zeros(2, 4, 3, 8) for key in bart_like_keys()}
    text = render_tensors(frame_tensors({"sd": sd}), width=80)
    assert all(len(line) <= 80 for line in text.splitlines()), text
    assert text.count("(2, 4, 3, 8)") == len(sd)
