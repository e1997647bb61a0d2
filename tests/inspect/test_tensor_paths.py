"""``inspect.tensor_paths`` (tensors by access path, each once; paths nested back) and ``inspect.saved_records``
(records through JSON and back), on a real tiny Llama."""

from __future__ import annotations

import json

import torch

from llmpdb.inspect.kv import inspect_cache
from llmpdb.inspect.modules import frame_stack, model_stack
from llmpdb.inspect.saved_records import records_from_json, records_to_json
from llmpdb.inspect.tensor_paths import SavedNode, collect_tensors, nest_paths, split_path
from llmpdb.inspect.tensors import frame_tensors
from tiny_models import tiny_llama


def test_collect_keeps_each_tensor_once_and_nest_paths_gives_the_same_paths_back():
    model = tiny_llama()
    with torch.no_grad():
        outputs = model(input_ids=torch.tensor([[1, 2, 3]]), use_cache=True)
    shared = torch.ones(2)
    found = collect_tensors({"out": outputs, "a": shared, "b": shared, "rows": [shared[0:1]]}, "x")
    paths = [p for p, _ in found.items]
    assert found.aliases == {"x['b']": "x['a']"}
    assert "x['out'].logits" in paths and "x['b']" not in paths
    tree = nest_paths(dict(found.items))
    assert [i.path for i in frame_tensors(tree)] == paths
    assert tree["x"]["out"].logits is outputs.logits and tree["x"]["rows"][0] is found.items[-1][1]
    assert isinstance(tree["x"]["out"], SavedNode)


def test_split_path_reads_literals_only():
    assert split_path("x.a[0]['k']") == [("root", "x"), ("attr", "a"), ("item", 0), ("item", "k")]
    for bad in ("x[__import__('os')]", "1x", "x.(y)"):
        try:
            split_path(bad)
        except (ValueError, SyntaxError):
            continue
        raise AssertionError(bad)


def test_stack_and_cache_records_survive_json():
    model = tiny_llama()
    seen = {}

    def hook(module, args):
        import sys

        seen["entries"] = model_stack(frame_stack(sys._getframe()))

    handle = model.model.layers[1].register_forward_pre_hook(hook)
    try:
        with torch.no_grad():
            outputs = model(input_ids=torch.tensor([[1, 2, 3]]), use_cache=True)
    finally:
        handle.remove()
    for record in (inspect_cache(outputs.cache if hasattr(outputs, "cache") else outputs.past_key_values),
                   tuple(seen["entries"])):
        again = records_from_json(json.loads(json.dumps(records_to_json(record))))
        assert again == record
    names = [e.module.qualname for e in seen["entries"] if e.module is not None]
    assert names == ["", "model"]


def test_state_dict_names_nest_with_numbered_parts_as_items():
    model = tiny_llama()
    state = model.state_dict()
    tree = nest_paths(state)
    assert set(tree) == {"model", "lm_head"}
    assert tree["model"].layers[1].self_attn.q_proj.weight is state["model.layers.1.self_attn.q_proj.weight"]
