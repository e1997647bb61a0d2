"""Two models of one class in sight (a teacher and a student): names say which one, by its variable."""

from __future__ import annotations

import re

import torch

from tiny_models import tiny_llama
from transcript import after, debug_transcript

IDS = torch.tensor([[1, 2, 3]])


def distill():
    student = tiny_llama()
    teacher = tiny_llama(num_hidden_layers=3)
    breakpoint()
    with torch.no_grad():
        teacher_logits = teacher(IDS).logits
        return student(IDS).logits - teacher_logits


def test_break_module_root_model_stop_header_and_stack_name_the_variable():
    out = debug_transcript(distill, ["c", "bm layers.1.mlp", "root-model", "c", "sm", "c", "sm", "c"], width=140)
    assert after(out, 1) == ("module breakpoint 1: layers.1.mlp -> student.model.layers.1.mlp, "
                             "teacher.model.layers.1.mlp\n")
    assert after(out, 2) == ("root-model: student = LlamaForCausalLM (found among the current frame's variables)\n"
                             "root-model: teacher = LlamaForCausalLM (found among the current frame's variables)\n")
    first = after(out, 3)
    assert first.startswith("module breakpoint 1: teacher.model.layers.1.mlp (LlamaMLP), hit 1\n")
    assert first.rstrip().endswith("| teacher.model.layers.1.mlp (LlamaMLP)")  # the path header
    table = after(out, 4)
    assert table.splitlines()[0].endswith("| teacher.model.layers.1.mlp (LlamaMLP)")
    rows = [re.split(r"\s{2,}", line.strip())[1:3] for line in table.splitlines() if "modeling_llama.py" in line]
    assert rows == [["teacher", "LlamaForCausalLM"], ["teacher.model", "LlamaModel"],
                    ["teacher.model.layers.1", "LlamaDecoderLayer"], ["teacher.model.layers.1.mlp", "LlamaMLP"]]
    assert after(out, 5).startswith("module breakpoint 1: student.model.layers.1.mlp (LlamaMLP), hit 2\n")
    assert "| student.model.layers.1.mlp (LlamaMLP)" in after(out, 5)
    assert "  student.model.layers.1.mlp  " in after(out, 6) and "teacher" not in after(out, 6).split("\n", 1)[1]


def one_model():
    model = tiny_llama()
    breakpoint()
    with torch.no_grad():
        return model(IDS).logits


def test_one_model_keeps_names_relative_to_the_root():
    out = debug_transcript(one_model, ["c", "bm layers.1.mlp", "c", "sm", "c"], width=140)
    assert after(out, 1) == "module breakpoint 1: layers.1.mlp -> model.layers.1.mlp\n"
    assert after(out, 2).startswith("module breakpoint 1: model.layers.1.mlp (LlamaMLP), hit 1\n")
    rows = [re.split(r"\s{2,}", line.strip())[1] for line in after(out, 3).splitlines() if "modeling_llama" in line]
    assert rows == ["(root)", "model", "model.layers.1", "model.layers.1.mlp"]


def two_configs_that_agree_on_some_sizes():
    teacher = tiny_llama()  # hidden 64, heads 4, kv_heads 2, head_dim 16, intermediate 128, vocab 256
    student = tiny_llama(hidden_size=32, intermediate_size=64, num_attention_heads=2, num_key_value_heads=1)
    input_ids = torch.tensor([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]])
    with torch.no_grad():
        t_out = teacher(input_ids, use_cache=True)
        s_out = student(input_ids, use_cache=True)
    breakpoint()
    return t_out, s_out


def test_dimensions_the_configs_agree_on_keep_their_names():
    """Two configs in sight: a size every candidate config gives the same name (vocab 256, head_dim 16) is
    named; one they disagree on (hidden 64 is the student's intermediate) is ``?``; a cache's keys are
    ``batch · kv_heads · seq · head_dim`` by role (the truth: the two configs, read here)."""
    out = debug_transcript(two_configs_that_agree_on_some_sizes, ["c", "shapes", "c"], width=200)
    rows = {line.split()[0]: re.split(r"\s{2,}", line.strip())[-1] for line in after(out, 1).splitlines()
            if line.strip()}
    assert rows["t_out.logits"] == "batch · seq · vocab"
    assert rows["s_out.logits"] == "batch · seq · vocab"
    assert rows["t_out.cache.layers[0].keys"] == "batch · kv_heads · seq · head_dim"
    assert rows["s_out.cache.layers[0].keys"] == "batch · kv_heads · seq · head_dim"
    assert rows["input_ids"] == "batch · seq"
    assert "config ?: " in after(out, 1)
