"""Sizes that collide name nothing wrongly: an int tensor's dims are never a model width, a weight's never
``seq``, a Mamba mixer's depthwise ``conv1d.weight`` ends in the ``conv_kernel``, and a model alone of its
class stays ``(root)`` when a library keeps parameterless modules of one class in its globals.

Real tiny models (random weights, built in code); the ``dims`` column is read off the real ``shapes``
table (``render_tensors``), so each check is what a user sees.
"""

from __future__ import annotations

import pytest
import torch
from tiny_models import tiny_llama

from llmpdb.inspect.dims import DimNamer
from llmpdb.inspect.dims_roles import param_role_of
from llmpdb.inspect.root_names import ambiguous_root_names
from llmpdb.inspect.tensors import frame_tensors
from llmpdb.render.tensors import render_tensors


def dims_of(frame: dict, namer: DimNamer) -> dict[str, str]:
    lines = render_tensors(frame_tensors(frame), width=400, namer=namer).splitlines()
    start = lines[0].index("dims") if "dims" in lines[0] else None
    rows = {}
    for line in lines[1:]:
        if not line.strip() or line[0] == " " or "tensor" in line.split()[0]:
            break
        rows[line.split()[0]] = line[start:].strip() if start is not None else ""
    return rows


@pytest.fixture(scope="module")
def mamba():
    transformers = pytest.importorskip("transformers")
    config = transformers.MambaConfig(vocab_size=96, hidden_size=32, state_size=8, num_hidden_layers=1,
                                      conv_kernel=4, expand=2)
    torch.manual_seed(0)
    return transformers.MambaForCausalLM(config).eval()


def test_int_ids_with_seq_equal_to_heads_and_no_input_ids_in_sight():
    model = tiny_llama(num_attention_heads=4, num_key_value_heads=2)  # heads 4 == the ids' length
    ids = torch.randint(0, 200, (2, 4))
    namer = DimNamer.from_frame({"model": model, "ids": ids})
    assert namer.size_of("heads") == 4 and namer.size_of("seq") is None
    assert dims_of({"ids": ids}, namer)["ids"] in ("", "? · ?", "batch · seq")  # never `? · heads`
    floats = torch.zeros(2, 4)
    assert dims_of({"x": floats}, namer)["x"] == "? · heads"  # a float tensor is still named by size


def test_mamba_conv_weight_and_states_are_named_from_the_config(mamba):
    state = {f"sd['{k}']": v for k, v in mamba.state_dict().items()}
    with torch.no_grad():
        out = mamba(torch.randint(3, 96, (2, 4)), use_cache=True)  # seq 4 == conv_kernel 4
    namer = DimNamer.from_config(mamba.config, batch=2, seq=4)
    dims = dims_of({**state, "out": out}, namer)
    conv = dims["sd['backbone.layers.0.mixer.conv1d.weight']"].split(" · ")
    assert conv[1:] == ["1", "conv_kernel"] and conv[0] in ("ssm_inner", "?")
    params = dict(mamba.named_parameters())
    weight = params["backbone.layers.0.mixer.conv1d.weight"]
    assert tuple(weight.shape) == (64, 1, 4)
    assert namer.describe(weight.shape, batched=False, path="model.backbone.layers[0].mixer.conv1d.weight") \
        .endswith("1 · conv_kernel")
    states = {k: v for k, v in dims.items() if "states" in k}
    assert states and all(v.endswith(("conv_kernel", "ssm_state")) for v in states.values()), states
    assert not any("seq" in v for k, v in dims.items() if k.startswith("sd[")), dims


def test_param_role_of_reads_only_a_conv1d_weight():
    assert param_role_of("sd['backbone.layers.0.mixer.conv1d.weight']") == "conv_weight"
    assert param_role_of("model.backbone.layers[0].mixer.conv1d.weight") == "conv_weight"
    assert param_role_of("model.layers[0].mlp.conv1d_weight") is None
    assert param_role_of("transformer.h[0].attn.c_attn.weight") is None


class Func(torch.nn.Module):
    """What transformers 5.25's Mamba module keeps in its globals: parameterless wrappers of one class."""

    def forward(self, x):
        return x


def test_a_model_alone_of_its_class_is_not_renamed_by_helpers_sharing_theirs():
    model = tiny_llama()
    found = [("model", model), ("causal_conv1d_fn", Func()), ("mamba_inner_fn", Func())]
    names = ambiguous_root_names(found)
    assert id(model) not in names and len(names) == 2
    teacher, student = tiny_llama(), tiny_llama()
    names = ambiguous_root_names([("teacher", teacher), ("student", student), ("f", Func())])
    assert names[id(teacher)] == "teacher" and names[id(student)] == "student" and id(found[1][1]) not in names
