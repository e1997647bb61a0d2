"""Tensor tables (llmpdb.render.tensors): exact strings at width 100, plain style."""

from __future__ import annotations

import pytest
import torch

from llmpdb.inspect.dims import DimNamer
from llmpdb.inspect.tensors import TensorInfo, frame_tensors, walk_tensors
from llmpdb.render.style import Style, strip_ansi
from llmpdb.render.tensors import cut_path, render_tensors
from llmpdb.units import format_number, format_shape, human_bytes, human_count
from tiny_models import tiny_llama

IDS = torch.tensor([[1, 2, 3, 4, 5, 6, 7]])


@pytest.fixture(scope="module")
def llama_frame():
    from transformers import BatchEncoding

    model = tiny_llama()
    inputs = BatchEncoding({"input_ids": IDS, "attention_mask": torch.ones_like(IDS)})
    with torch.no_grad():
        outputs = model(**inputs)
    return {"model": model, "inputs": inputs, "outputs": outputs, "logits": outputs.logits}


def test_units():
    assert [human_bytes(n) for n in (0, 448, 1024, 18432, 1258291, 3 * 2**30)] == \
        ["0 B", "448 B", "1.0 KiB", "18.0 KiB", "1.2 MiB", "3.0 GiB"]
    assert [human_count(n) for n in (999, 106816, 1_200_000, 7_000_000_000)] == ["999", "106.8K", "1.2M", "7.0B"]
    assert [format_number(v) for v in (None, 3.0, -0.0123456, 12345.678, 2_000_000.0, 7)] == \
        ["-", "3", "-0.0123", "1.23e+04", "2e+06", "7"]
    assert [format_shape(s) for s in ((), (7,), (1, 7), (2, "j1", 3))] == ["()", "(7,)", "(1, 7)", "(2, j1, 3)"]
    assert cut_path("outputs.cache.layers[0].values", 24) == "outputs…layers[0].values"
    assert cut_path("short", 24) == "short" and len(cut_path("x" * 50, 20)) == 20


def test_llama_frame_table(llama_frame):
    text = render_tensors(frame_tensors(llama_frame), width=100, namer=DimNamer.from_frame(llama_frame))
    assert text == """\
path                            shape          dtype     size  dims
inputs['input_ids']             (1, 7)         i64       56 B  batch · seq
inputs['attention_mask']        (1, 7)         i64       56 B  batch · seq
outputs.logits                  (1, 7, 256)    f32    7.0 KiB  batch · seq · vocab
outputs.cache.layers[0].keys    (1, 2, 7, 16)  f32      896 B  batch · kv_heads · seq · head_dim
outputs.cache.layers[0].values  (1, 2, 7, 16)  f32      896 B  batch · kv_heads · seq · head_dim
outputs.cache.layers[1].keys    (1, 2, 7, 16)  f32      896 B  batch · kv_heads · seq · head_dim
outputs.cache.layers[1].values  (1, 2, 7, 16)  f32      896 B  batch · kv_heads · seq · head_dim
logits                          (1, 7, 256)    f32    7.0 KiB  batch · seq · vocab
8 tensors, 10.6 KiB total
same tensor, counted once: logits = outputs.logits
dims from model.config (LlamaConfig), batch/seq from inputs['input_ids']
modules and optimizers (summarized, not expanded; `shapes NAME` lists a module's tensors):
object  class             params  dtype  device       size  detail
model   LlamaForCausalLM  106.8K  f32    cpu     417.3 KiB  eval"""


def test_grad_and_flags_columns_compaction_and_grad_giving_way(llama_frame):
    model = llama_frame["model"]
    outputs = model(input_ids=IDS)  # with grad: grad_fn names make the table too wide for 100 columns
    local = {"input_ids": IDS, "outputs": outputs, "k": outputs.past_key_values.layers[0].keys.transpose(1, 2)}
    walk = frame_tensors(local)
    namer = DimNamer.from_frame({"model": model, **local})
    assert render_tensors(walk, width=130, namer=namer) == """\
path                            shape          dtype     size  grad        flags           dims
input_ids                       (1, 7)         i64       56 B                              batch · seq
outputs.logits                  (1, 7, 256)    f32    7.0 KiB  UnsafeView                  batch · seq · vocab
outputs.cache.layers[0].keys    (1, 2, 7, 16)  f32      896 B  Cat                         batch · kv_heads · seq · head_dim
outputs.cache.layers[0].values  (1, 2, 7, 16)  f32      896 B  Cat                         batch · kv_heads · seq · head_dim
outputs.cache.layers[1].keys    (1, 2, 7, 16)  f32      896 B  Cat                         batch · kv_heads · seq · head_dim
outputs.cache.layers[1].values  (1, 2, 7, 16)  f32      896 B  Cat                         batch · kv_heads · seq · head_dim
k                               (1, 7, 2, 16)  f32      896 B  Transpose   non-contiguous  batch · seq · kv_heads · head_dim
7 tensors, 11.4 KiB total
dims from model.config (LlamaConfig), batch/seq from input_ids"""
    text = render_tensors(walk, width=100, namer=namer)
    assert text == """\
path                          shape          dtype     size  flags       dims
input_ids                     (1, 7)         i64       56 B              batch·seq
outputs.logits                (1, 7, 256)    f32    7.0 KiB              batch·seq·vocab
outputs.cache.layers[0].keys  (1, 2, 7, 16)  f32      896 B              batch·kv_heads·seq·head_dim
outputs.c…e.layers[0].values  (1, 2, 7, 16)  f32      896 B              batch·kv_heads·seq·head_dim
outputs.cache.layers[1].keys  (1, 2, 7, 16)  f32      896 B              batch·kv_heads·seq·head_dim
outputs.c…e.layers[1].values  (1, 2, 7, 16)  f32      896 B              batch·kv_heads·seq·head_dim
k                             (1, 7, 2, 16)  f32      896 B  non-contig  batch·seq·kv_heads·head_dim
7 tensors, 11.4 KiB total
dims from model.config (LlamaConfig), batch/seq from input_ids
grad column hidden to fit 100 columns"""
    assert max(len(line) for line in text.splitlines()[:8]) == 100


def test_stats_columns():
    values = {
        "a": torch.tensor([1.0, float("nan"), 3.0, float("inf")]),
        "b": torch.arange(6).view(2, 3).t(),
        "c": torch.tensor([0.001234, 12345.678], dtype=torch.bfloat16),
        "e": torch.zeros(0),
    }
    text = render_tensors(walk_tensors(values, "t", stats=True), width=100, stats=True)
    assert text == """\
path    shape   dtype  size  flags               min    max      mean       std  nan  inf
t['a']  (4,)    f32    16 B                        1      3         2      1.41    1    1
t['b']  (3, 2)  i64    48 B  non-contiguous        0      5       2.5      1.87    0    0
t['c']  (2,)    bf16    4 B                  0.00124  12352  6.18e+03  8.73e+03    0    0
t['e']  (0,)    f32     0 B                        -      -         -         -    0    0
4 tensors, 68 B total
min/max/mean/std ignore NaN and Inf (counted in nan/inf); std is unbiased"""


def test_meta_model_with_stats_shows_device_and_computes_nothing():
    with torch.device("meta"):
        model = tiny_llama()
    walk = walk_tensors(model.model.layers[0].self_attn, "attn", stats=True, max_items=3)
    text = render_tensors(walk, width=100, stats=True)
    assert text == """\
path                shape     dtype  device      size  flags      min  max  mean  std
attn.q_proj.weight  (64, 64)  f32    meta    16.0 KiB  Parameter    -    -     -    -
attn.k_proj.weight  (32, 64)  f32    meta     8.0 KiB  Parameter    -    -     -    -
attn.v_proj.weight  (32, 64)  f32    meta     8.0 KiB  Parameter    -    -     -    -
3 tensors, 0 B total (+ 32.0 KiB on the meta device, not allocated); 1 more not listed (limit 3)
no statistics for 3 tensors (meta: no readable data, nothing computed)"""


def test_meta_tensors_are_not_counted_as_allocated():
    walk = frame_tensors({"real": torch.zeros(4), "meta": torch.empty(1000, device="meta")})
    footer = render_tensors(walk, width=100).splitlines()[-1]
    assert footer == "2 tensors, 16 B total (+ 3.9 KiB on the meta device, not allocated)"


def test_ambiguous_legend_notes_and_unsearched():
    namer = DimNamer.from_config(tiny_llama().config, batch=2, seq=16)
    deep = [[[[torch.zeros(1)]]]]
    walk = frame_tensors({"x": torch.zeros(2, 16, 5), "deep": deep}, max_depth=2)
    walk.notes.append("y: not searched (RuntimeError: boom)")
    assert render_tensors(walk, width=100, namer=namer) == """\
path  shape       dtype   size  dims
x     (2, 16, 5)  f32    640 B  batch · ? · ?
1 tensor, 640 B total; 1 containers/entries not searched (limits: depth 2, 2000 entries per
  container)
dims; ? = unknown or shared size
y: not searched (RuntimeError: boom)"""


def test_empty_and_plain_list_and_colour():
    assert render_tensors([]) == "no tensors found"
    assert render_tensors(walk_tensors(3, "n"), empty="no tensors in n (int)") == "no tensors in n (int)"
    info = TensorInfo("x", (2,), "f16", "cuda:0", 4, True, None, ())
    assert render_tensors([info]) == """\
path  shape  dtype  device  size  grad
x     (2,)   f16    cuda:0   4 B  leaf
1 tensor, 4 B total"""
    coloured = render_tensors([info], style=Style(color=True))
    assert "\x1b[" in coloured and strip_ansi(coloured) == render_tensors([info])


def test_footer_without_a_config_names_where_batch_and_seq_came_from():
    from llmpdb.inspect.dims import DimNamer
    from llmpdb.inspect.tensors import frame_tensors

    local_vars = {"labels": torch.zeros(2, 35, dtype=torch.long)}
    text = render_tensors(frame_tensors(local_vars), namer=DimNamer.from_frame(local_vars))
    assert text.splitlines()[-1] == "dims: batch/seq from labels"


def test_stats_never_say_no_nan_anywhere_when_the_walk_stopped_at_its_limits():
    clean = [torch.zeros(1) for _ in range(3)]
    values = {"clean": [torch.zeros(1) for _ in range(5)], "nanv": torch.tensor([float("nan"), 1.0])}
    text = render_tensors(frame_tensors(values, stats=True, max_items=3), width=100, stats=True)
    text = " ".join(text.replace("\n  ", " ").split(" "))  # footers wrap at the width with a 2-space indent
    assert "nanv" not in text  # past the limit: not listed, so its NaN is not counted
    assert "no NaN or Inf in the listed tensors (the walk stopped at its limits)" in text
    assert "no NaN or Inf in any tensor" not in text
    full = render_tensors(frame_tensors({"clean": clean}, stats=True), width=100, stats=True)
    assert "no NaN or Inf in any tensor" in full
