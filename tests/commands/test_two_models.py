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
