"""Mamba and Jamba (state-space and hybrid layers) under a real debugger: the conv/recurrent states are named
from the config (``conv_kernel``/``mamba_d_conv``, ``state_size``/``mamba_d_state``, expand × hidden), the
path line says no attention kernel on a model without attention, and ``kv`` at 80 columns never cuts a shape."""

from __future__ import annotations

import re

import pytest
import torch
from tiny_zoo_models import tiny_jamba, tiny_mamba
from transcript import debug_transcript, outputs_of


def _forward_and_stop(model):
    ids = torch.randint(0, 256, (2, 7))
    out = model(ids, use_cache=True)
    cache = out.past_key_values
    breakpoint()
    return cache


def _stop_then_forward(model):
    breakpoint()
    return model(torch.randint(0, 256, (2, 7)), use_cache=True)


def _rows(shapes: str) -> dict[str, str]:
    return {line.split()[0]: re.split(r"\s{2,}", line.strip())[-1] for line in shapes.splitlines() if line.strip()}


@pytest.mark.parametrize("build, kernel, state, inner", [
    (tiny_mamba, "conv_kernel", "state_size", ("expand", "hidden_size")),
    (tiny_jamba, "mamba_d_conv", "mamba_d_state", ("mamba_expand", "hidden_size")),
], ids=["mamba", "jamba"])
def test_ssm_states_named_from_the_config(build, kernel, state, inner):
    model = build()
    config = model.config
    sizes = (getattr(config, inner[0]) * getattr(config, inner[1]), getattr(config, kernel), getattr(config, state))
    out = outputs_of(debug_transcript(_forward_and_stop, ["c", "shapes cache", "c"], model, width=200))
    rows = _rows(out[0])
    conv = next(v for k, v in rows.items() if "conv_states" in k)
    recurrent = next(v for k, v in rows.items() if "recurrent_states" in k)
    assert conv == "batch · ssm_inner · conv_kernel", out[0]
    assert recurrent == "batch · ssm_inner · ssm_state", out[0]
    assert f"(2, {sizes[0]}, {sizes[1]})" in out[0] and f"(2, {sizes[0]}, {sizes[2]})" in out[0]


def test_no_attention_kernel_on_a_model_without_attention():
    model = tiny_mamba()
    assert not any("attention" in type(m).__name__.lower() for m in model.modules())  # the truth
    out = outputs_of(debug_transcript(_stop_then_forward, ["c", "bm backbone.layers.1.mixer", "c", "c"],
                                      model, width=200))
    stop = next(text for text in out if "backbone.layers.1.mixer (MambaMixer)" in text and "path:" in text)
    assert "attn" not in stop.split("path:", 1)[1], stop
    jamba = tiny_jamba()
    out = outputs_of(debug_transcript(_stop_then_forward, ["c", "bm model.layers.1.self_attn", "c", "c"],
                                      jamba, width=200))
    assert any("attn sdpa" in text or "attn eager" in text for text in out if "path:" in text)


@pytest.mark.parametrize("build", [tiny_mamba, tiny_jamba], ids=["mamba", "jamba"])
def test_kv_states_at_80_columns(build):
    model = build()
    out = outputs_of(debug_transcript(_forward_and_stop, ["c", "kv", "c"], model, width=80))
    kv = out[0]
    assert all(len(line) <= 80 for line in kv.splitlines()), kv
    assert not re.search(r"\([^)]*…", kv), kv   # no shape cut
    for shape in re.findall(r"\(\d[\d, ]*\)", kv):
        assert re.fullmatch(r"\((\d+, )*\d+\)", shape), shape
    assert re.search(r"conv\[0\] \(2, \d+, 4\)", kv), kv
