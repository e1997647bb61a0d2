"""`grads` under a real llmpdb debugger: a tiny Llama with a frozen layer, before and after backward()."""

from __future__ import annotations

import torch
from tiny_models import tiny_llama
from transcript import debug_transcript, outputs_of

from llmpdb.inspect.grads import grad_report, layer_of, param_matches


def train_step(model):
    ids = torch.arange(3, 10).unsqueeze(0)
    breakpoint()
    model(ids).logits.sum().backward()
    breakpoint()
    return ids


def frozen_layer0_llama():
    model = tiny_llama()
    for p in model.model.layers[0].parameters():
        p.requires_grad_(False)
    return model


def test_grads_before_and_after_backward_with_a_frozen_layer():
    model = frozen_layer0_llama()
    commands = ["c", "grads", "c", "grads", "grads layers.1.mlp", "c"]
    chunks = outputs_of(debug_transcript(train_step, commands, model, width=100))
    before = chunks[0].splitlines()
    assert before[-1] == "grads: 12 trainable (0 with a grad, 12 no grad yet) · 9 frozen"
    after = chunks[2].splitlines()
    assert after[0].split() == ["parameter", "shape", "grad", "norm", "status"]
    rows = {line.split()[0]: line.split()[1:] for line in after[1:-1]}
    assert " ".join(after[after.index(next(l for l in after if l.startswith("model.layers.0")))].split()) == \
        "model.layers.0 — 9 params, all frozen"
    assert after[-1].startswith("grads: 12 trainable (12 with a grad) · 9 frozen · total norm ")
    frozen_rows = [line for line in after if "frozen (requires_grad=False)" in line]
    assert len(frozen_rows) == 9 and all(line.startswith("  .") for line in frozen_rows)
    lm_head = after.index(next(l for l in after if l.startswith("lm_head")))
    assert after[lm_head + 1].split()[:3] == [".weight", "(256,", "64)"]
    assert float(after[lm_head + 1].split()[3]) > 0
    assert rows["model.layers.1"][-2:] == ["9", "params"]
    assert chunks[3].splitlines()[-1].startswith("grads: 3 trainable (3 with a grad) · 0 frozen")


def test_grads_nan_gradient_and_bad_input():
    model = tiny_llama()
    commands = ["c", "c", "!model.lm_head.weight.grad[0, 0] = float('inf')", "grads lm_head", "grads nope",
                "grads --model ids", "grads --bogus", "c"]
    chunks = outputs_of(debug_transcript(train_step, commands, model, width=100))
    lines = chunks[2].splitlines()
    assert lines[2].split()[-4:] == ["NaN", "0,", "Inf", "1"]
    assert lines[-1] == "grads: 1 trainable (1 with a grad) · 0 frozen · NaN/Inf in 1 gradient · total norm inf"
    assert chunks[3] == "*** grads: no parameter matches 'nope'"
    assert chunks[4] == "*** grads: ids is a Tensor, not a torch module"
    assert chunks[5].startswith("*** grads: unknown option --bogus")


def test_grad_report_pure():
    model = frozen_layer0_llama()
    report = grad_report(model)
    assert (report.trainable, report.frozen, report.no_grad_yet, report.bad) == (12, 9, 12, 0)
    assert [g for g, _ in report.groups] == ["model.embed_tokens", "model.layers.0", "model.layers.1", "model.norm",
                                             "lm_head"]
    assert layer_of("model.layers.10.mlp.up_proj.weight") == "model.layers.10"
    assert param_matches("*proj.weight", "model.layers.1.mlp.up_proj.weight")
    assert not param_matches("layers.1", "model.layers.10.mlp.up_proj.weight")
