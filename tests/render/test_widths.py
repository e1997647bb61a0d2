"""Every table fits the width it is given (80 and 60 columns), shapes whole, names cut only in the middle.

Real tiny models; the tables are rendered the way the commands render them, and one transcript runs the
commands themselves (``shapes``, ``shapes --stats``, ``sm``, ``kv``, ``bm``) in a real llmpdb debugger.
"""

from __future__ import annotations

import re
import sys

import pytest
import torch
from tiny_models import tiny_llama, tiny_t5
from transcript import debug_transcript

from llmpdb.inspect.dims import DimNamer
from llmpdb.inspect.kv import inspect_cache
from llmpdb.inspect.modules import frame_stack, model_stack
from llmpdb.inspect.snapshot import diff_with_model, take_snapshot
from llmpdb.inspect.statediff import statediff
from llmpdb.inspect.stats import tensor_stats
from llmpdb.inspect.tensors import frame_tensors
from llmpdb.render.kv import render_cache, render_layer
from llmpdb.render.modules import module_label, render_model_stack
from llmpdb.render.statediff import render_snapdiff, render_statediff
from llmpdb.render.table import fit_columns
from llmpdb.render.tensors import render_tensors
from llmpdb.session import SESSION
from llmpdb.units import format_shape

WIDTHS = (80, 60)
SHAPE = re.compile(r"\((?:\d+(?:, )?)*,?\)")


def assert_fits(text: str, width: int) -> None:
    too_long = [line for line in text.splitlines() if len(line) > width]
    assert not too_long, f"{len(too_long)} lines over {width}: {too_long}"


def is_middle_cut(shown: str, full: str) -> bool:
    """``shown`` is ``full`` or ``full`` with characters taken out of its middle (``model.la…self_attn``)."""
    if shown == full:
        return True
    head, sep, tail = shown.partition("…")
    return bool(sep) and full.startswith(head) and full.endswith(tail) and len(head) + len(tail) < len(full)


@pytest.fixture(scope="module")
def llama_frame():
    model = tiny_llama()
    a_rather_long_local_name_for_inputs = {"input_ids": torch.tensor([[1, 2, 3, 4, 5, 6, 7]])}
    outputs = model(**a_rather_long_local_name_for_inputs, use_cache=True)  # with grad: grad_fn names
    return {"model": model, "a_rather_long_local_name_for_inputs": a_rather_long_local_name_for_inputs,
            "outputs": outputs, "k": outputs.past_key_values.layers[0].keys.transpose(1, 2)}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("stats", [False, True])
def test_shapes_table_fits_with_whole_shapes_and_middle_cut_paths(llama_frame, width, stats):
    walk = frame_tensors(llama_frame, stats=stats)
    text = render_tensors(walk, width=width, namer=DimNamer.from_frame(llama_frame), stats=stats)
    assert_fits(text, width)
    lines = text.splitlines()
    assert lines[0].split()[:2] == ["path", "shape"]
    for info, line in zip(walk, lines[1:len(walk) + 1]):
        assert format_shape(info.shape) in line                    # never cut
        assert is_middle_cut(line.split("  ")[0], info.path)
    if width == 80 and not stats:                                  # at 80 the dims stay, abbreviated
        assert lines[0].split()[-1] == "dims" and "dims abbreviated: b batch" in text
    assert "hidden to fit" in text  # what had to go is said


@pytest.mark.parametrize("width", WIDTHS)
def test_kv_tables_fit(width):
    model = tiny_t5()
    with torch.no_grad():
        out = model.generate(torch.ones(1, 7, dtype=torch.long), max_new_tokens=2, do_sample=False,
                             return_dict_in_generate=True)
    report = inspect_cache(out.past_key_values)
    text = render_cache(report, width=width, path="out.past_key_values")
    assert_fits(text, width)
    assert "(1, 4, 7, 8)" in text
    layer = report.layer(1, "cross")
    cache_layer = out.past_key_values.cross_attention_cache.layers[1]
    stats = {"keys": tensor_stats(cache_layer.keys), "values": tensor_stats(cache_layer.values)}
    detail = render_layer(report, layer, stats=stats, width=width)
    assert_fits(detail, width)
    rows = detail.splitlines()
    header = next(i for i, line in enumerate(rows) if line.startswith("tensor"))
    assert rows[header].split()[:2] == ["tensor", "shape"]
    assert rows[header + 1].startswith("keys    (1, 4, 7, 8)") and "min" in rows[header]


@pytest.mark.parametrize("width", WIDTHS + (40,))
def test_model_stack_fits(width):
    model = tiny_llama()
    seen = {}

    def hook(module, args, output):
        seen["entries"] = model_stack(frame_stack(sys._getframe()))

    handle = model.model.layers[1].self_attn.o_proj.register_forward_hook(hook)
    try:
        with torch.no_grad():
            model(torch.ones(1, 3, dtype=torch.long))
    finally:
        handle.remove()
    text = render_model_stack(seen["entries"], current=len(seen["entries"]) - 1, width=width)
    assert_fits(text, width)
    labels = {module_label(e.module) for e in seen["entries"] if e.module is not None}
    rows = [re.split(r"\s{2,}", line.strip()) for line in text.splitlines()[1:]
            if line.strip().startswith(("#", ">#"))]
    module_rows = [row for row in rows if not row[1].endswith("()")]
    assert len(module_rows) == len(labels) >= 4
    assert all(any(is_middle_cut(row[1], label) for label in labels) for row in module_rows)
    assert all(re.search(r":\d+$", row[-1]) for row in rows)             # the line number is never cut


@pytest.mark.parametrize("width", WIDTHS)
def test_statediff_tables_fit(width):
    model = tiny_llama()
    other = tiny_llama(num_hidden_layers=1, intermediate_size=96)
    text = render_statediff(statediff(model, other), width=width)
    assert_fits(text, width)
    assert "(128, 64)" in text and "(96, 64)" in text
    before = take_snapshot(model, name="a_long_snapshot_name", stop=1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1)
    diff = render_snapdiff(diff_with_model(before, model, stop=2), width=width)
    assert_fits("\n".join(diff.splitlines()[1:]), width)          # the sections (the first line is a header)


def test_fit_columns_order_and_hidden_report():
    headers = ["path", "shape", "grad", "dims"]
    rows = [["model.layers.10.self_attn.q_proj", "(1, 7, 64)", "MmBackward0", "batch · seq · hidden"]]
    new_headers, new_rows, hidden = fit_columns(headers, rows, 40, [
        ("rewrite", "grad", lambda t: t.replace("Backward0", "")), ("hide", "grad"), ("cut", "path", 18),
        ("hide", "nope")])
    assert new_headers == ["path", "shape", "dims"] and hidden == ["grad"]
    assert new_rows[0][:2] == ["model.la…tn.q_proj", "(1, 7, 64)"]      # cut in the middle, shape whole
    assert rows[0][2] == "MmBackward0"                             # the input is not changed


def stop_in_decode(model):
    def hook(module, args, kwargs):
        cache = kwargs.get("cache")
        if cache is not None and cache.get_seq_length() > 0:
            breakpoint()

    handle = model.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        model.generate(torch.ones(1, 7, dtype=torch.long), max_new_tokens=2, do_sample=False)
    finally:
        handle.remove()


@pytest.mark.parametrize("width", WIDTHS)
def test_commands_at_the_prompt_fit(width):
    SESSION.reset()
    try:
        out = debug_transcript(stop_in_decode, ["c", "shapes", "shapes --stats", "sm", "kv", "kv 0 --stats",
                                                "bm model.layers.1.self_attn.q_proj --once", "bm", "c", "c"],
                               tiny_llama(), width=width)
    finally:
        SESSION.reset()
    answers = out.split("(llmpdb) ")[2:]   # what each command printed (the stop's own lines come first)
    tables = [line for answer in answers for line in answer.splitlines()
              if not line.startswith(("[", "-> ", "path: ", "module breakpoint", "llmpdb: "))]
    assert any(line.startswith("path ") for line in tables) and any(line.startswith("layer ") for line in tables)
    assert_fits("\n".join(tables), width)
    assert "(1, 2, 7, 16)" in out


@pytest.mark.parametrize("text, cells", [
    ("注意力", 6),                       # East Asian wide
    ("a\u200bb", 2),                     # a zero-width space takes no cell
    ("e\u0301", 1),                      # a combining accent
    ("\U0001F44D\U0001F3FD", 2),         # thumbs up with a skin-tone modifier: one glyph
    ("\U0001F469\u200d\U0001F469\u200d\U0001F467", 2),  # a ZWJ family: one glyph
    ("\x1b[31mred\x1b[0m", 3),           # colour codes take no cell
])
def test_display_width_counts_cells_as_the_terminal_draws_them(text, cells):
    from llmpdb.render.style import visible_len

    assert visible_len(text) == cells
