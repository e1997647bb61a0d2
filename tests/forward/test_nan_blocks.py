"""Which modules `nan-break --blocks` checks: each layer, and what runs between layers, read from the tree
only (never a user's property or ``__getattr__``), on real transformers models and hostile modules."""

from __future__ import annotations

import torch
from tiny_models import tiny_gpt2, tiny_llama, tiny_t5
from torch import nn

from llmpdb.forward.nan_blocks import bad_weights, check_blocks, modules_inside
from llmpdb.forward.nan_break import bad_values


def names(model, modules) -> list[str]:
    by_id = {id(m): n for n, m in model.named_modules()}
    return [by_id[id(m)] for m in modules]


def test_blocks_are_each_layer_and_what_runs_between_layers():
    llama = tiny_llama(num_hidden_layers=3)
    assert names(llama, check_blocks(llama)) == [
        "", "model", "model.embed_tokens", "model.layers.0", "model.layers.1", "model.layers.2", "model.norm",
        "model.rotary_emb", "lm_head"]
    gpt2 = tiny_gpt2()
    assert names(gpt2, check_blocks(gpt2)) == [
        "", "transformer", "transformer.wte", "transformer.wpe", "transformer.drop", "transformer.h.0",
        "transformer.h.1", "transformer.ln_f", "lm_head"]
    t5 = tiny_t5()  # two stacks, each looked into
    assert names(t5, check_blocks(t5)) == [
        "", "shared", "encoder", "encoder.embed_tokens", "encoder.block.0", "encoder.block.1",
        "encoder.final_layer_norm", "encoder.dropout", "decoder", "decoder.embed_tokens", "decoder.block.0",
        "decoder.block.1", "decoder.final_layer_norm", "decoder.dropout", "lm_head"]
    shared = nn.Linear(2, 2)
    tied = nn.Sequential(shared, nn.ReLU(), shared)  # one module reached twice: one block
    assert names(tied, check_blocks(tied)) == ["", "0", "1"]


def test_a_model_without_containers_is_its_children_and_a_sequential_its_items():
    class TwoLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.act, self.fc2 = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 2)

    plain = TwoLayer()
    assert names(plain, check_blocks(plain)) == ["", "fc1", "act", "fc2"]
    seq = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.ReLU(), nn.Linear(2, 2)))
    assert names(seq, check_blocks(seq)) == ["", "0", "1.0", "1.1"]


class Hostile(nn.Module):
    """Every attribute lookup that reaches ``__getattr__`` raises; so does its property."""

    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(2, 2)
        self._modules["again"] = self  # a cycle in the tree (add_module would ask __getattr__)

    @property
    def weight(self):
        raise AssertionError("a property was called")

    def __getattr__(self, name):
        raise AssertionError(f"__getattr__({name!r}) was called")


def test_the_tree_is_read_without_properties_and_a_cycle_ends():
    model = Hostile()
    assert names(model, check_blocks(model)) == ["", "inner"]
    assert names(model, modules_inside(model)) == ["inner"]
    assert bad_weights(model, bad_values) == []


def test_bad_weights_names_parameters_and_buffers_relative_to_the_block_at_most_limit():
    layer = tiny_llama().model.layers[1]
    with torch.no_grad():
        layer.mlp.down_proj.weight[0, :2] = float("nan")
        layer.self_attn.q_proj.weight[1, 1] = float("inf")
    layer.mlp.register_buffer("scale", torch.tensor([1.0, float("-inf")]))
    assert bad_weights(layer, bad_values) == [
        "self_attn.q_proj.weight holds 0 NaN, 1 Inf of 4096",
        "mlp.scale holds 0 NaN, 1 Inf of 2",  # (a module's own tensors before its children's)
        "mlp.down_proj.weight holds 2 NaN, 0 Inf of 8192"]
    assert len(bad_weights(layer, bad_values, limit=1)) == 1
    assert names(layer, modules_inside(layer))[:3] == ["self_attn", "self_attn.q_proj", "self_attn.k_proj"]
