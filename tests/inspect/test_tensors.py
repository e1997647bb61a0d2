"""Tensor records and the tensor walker (llmpdb.inspect.tensors, .stats, .safe) on real tiny models."""

from __future__ import annotations

import collections
import dataclasses
import math
import subprocess
import sys

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from llmpdb.inspect.safe import is_tensor, safe_getattr, safe_repr, short_dtype
from llmpdb.inspect.stats import TensorStats, tensor_stats
from llmpdb.inspect.tensors import TensorInfo, frame_tensors, shapes, tensor_info, walk_tensors
from tiny_models import plain_model, tiny_gpt2, tiny_llama, tiny_t5

IDS = torch.tensor([[1, 2, 3, 4, 5, 6, 7]])


class Hostile:
    """repr, every missing attribute and bool() raise."""

    def __repr__(self):
        raise RuntimeError("no repr for you")

    def __getattr__(self, name):
        raise RuntimeError(f"no attribute {name}")

    def __bool__(self):
        raise RuntimeError("no truth")


class VeryHostile:
    """Even ``__class__`` and ``__dict__`` lookups raise."""

    def __getattribute__(self, name):
        raise RuntimeError(f"no {name}")

    def __repr__(self):
        raise RuntimeError("no repr")


class RecordOps(TorchDispatchMode):
    """Records every aten op run while active: no op at all means no tensor data was touched."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def paths(found):
    return [i.path for i in found]


# ---- safe helpers ---------------------------------------------------------------------------------
def test_safe_repr_never_raises_and_never_reads_tensors():
    assert safe_repr(Hostile()) == "<Hostile object (repr failed: RuntimeError: no repr for you)>"
    assert safe_repr(VeryHostile()).startswith("<VeryHostile object (repr failed: RuntimeError")
    assert safe_repr([torch.zeros(2, 3), "x"]) == "[<Tensor f32 (2, 3)>, 'x']"
    assert safe_repr("a" * 50, 10) == "'aaaaaaaa…"
    value = {"k": torch.ones(4)}
    with RecordOps() as rec:
        assert safe_repr(value) == "{'k': <Tensor f32 (4,)>}"
    assert rec.ops == []


def test_safe_getattr_and_is_tensor():
    assert safe_getattr(Hostile(), "config", "dflt") == "dflt"
    assert safe_getattr(VeryHostile(), "x", 5) == 5
    assert is_tensor(torch.nn.Parameter(torch.zeros(1)))
    assert not is_tensor([1]) and not is_tensor(VeryHostile())
    assert [short_dtype(d) for d in (torch.float32, torch.bfloat16, torch.int64, torch.bool)] == \
        ["f32", "bf16", "i64", "bool"]


def test_safe_does_not_import_torch():
    code = ("import sys; from llmpdb.inspect.safe import is_tensor; "
            "from llmpdb.inspect.tensors import walk_tensors; "
            "assert not is_tensor(1); assert walk_tensors({'a': [1]}, 'x') == []; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---- tensor_info ---------------------------------------------------------------------------------
def test_tensor_info_metadata():
    x = torch.zeros(2, 3, dtype=torch.bfloat16, requires_grad=True)
    y = (x * 2).t()
    assert tensor_info(y, "y") == TensorInfo("y", (3, 2), "bf16", "cpu", 12, True, "TBackward0",
                                             ("non-contiguous",))
    p = torch.nn.Parameter(torch.zeros(4))
    assert tensor_info(p, "p").flags == ("Parameter",)
    assert tensor_info(p, "p").grad_fn is None and tensor_info(p, "p").requires_grad


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
def test_tensor_info_special_layouts():
    sparse = torch.eye(4).to_sparse()
    info = tensor_info(sparse, "s")
    assert info.flags == ("sparse",)
    assert info.nbytes == 4 * 4 + 2 * 4 * 8  # stored values + indices, not the dense 64 bytes
    csr = tensor_info(torch.eye(4).to_sparse_csr(), "c")
    assert csr.flags == ("sparse_csr",) and csr.nbytes == 4 * 4 + 5 * 8 + 4 * 8
    meta = tensor_info(torch.empty(3, 5, device="meta"), "m", stats=True)
    assert (meta.device, meta.flags, meta.nbytes, meta.stats) == ("meta", ("meta",), 60, None)
    nested = tensor_info(torch.nested.nested_tensor([torch.zeros(2, 3), torch.zeros(4, 3)],
                                                    layout=torch.jagged), "n")
    assert nested.flags == ("nested",) and nested.shape[0] == 2 and isinstance(nested.shape[1], str)
    assert nested.nbytes == 6 * 3 * 4


def test_fake_tensor_flag_and_no_stats():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        fake = torch.empty(2, 3)
    info = tensor_info(fake, "f", stats=True)
    assert "fake" in info.flags and info.stats is None and info.shape == (2, 3)


DTENSOR_SCRIPT = """
import tempfile, torch, torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import distribute_tensor, Shard
from llmpdb.inspect.tensors import tensor_info
dist.init_process_group("gloo", rank=0, world_size=1, init_method="file://" + tempfile.mktemp())
d = distribute_tensor(torch.ones(4, 6), init_device_mesh("cpu", (1,)), [Shard(0)])
info = tensor_info(d, "d", stats=True)
print(info.shape, info.flags, info.stats)
dist.destroy_process_group()
"""


def test_dtensor_flag_and_no_stats_without_collectives():
    # a subprocess: a process group in the test process would give every later prompt a rank
    out = subprocess.run([sys.executable, "-c", DTENSOR_SCRIPT], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "(4, 6) ('DTensor',) None", out.stderr[-2000:]


class MyTensor(torch.Tensor):
    pass


def test_unknown_tensor_subclass_is_named_in_flags():
    info = tensor_info(torch.zeros(2, 3).as_subclass(MyTensor), "m")
    assert info.flags == ("MyTensor",) and info.shape == (2, 3)


# ---- walking real model outputs ----------------------------------------------------------------------
def test_walk_llama_output_with_dynamic_cache():
    out = tiny_llama()(input_ids=IDS)
    found = walk_tensors(out, "outputs")
    assert paths(found) == ["outputs.logits"] + [
        f"outputs.cache.layers[{i}].{kv}" for i in (0, 1) for kv in ("keys", "values")]
    assert found[0].shape == (1, 7, 256) and found[1].shape == (1, 2, 7, 16)
    assert found.objects == [] and found.left_out == 0 and found.notes == []


def test_walk_gpt2_output():
    out = tiny_gpt2()(input_ids=IDS)
    found = walk_tensors(out, "out")
    assert found[0].path == "out.logits" and found[0].shape == (1, 7, 256)
    assert found[1].path == "out.cache.layers[0].keys" and found[1].shape == (1, 4, 7, 8)


def test_walk_t5_encoder_decoder_cache():
    out = tiny_t5()(input_ids=IDS, decoder_input_ids=IDS[:, :3])
    found = walk_tensors(out, "out")
    got = {i.path: i.shape for i in found}
    assert got["out.logits"] == (1, 3, 256)
    assert got["out.cache.self_attention_cache.layers[0].keys"] == (1, 4, 3, 8)
    assert got["out.cache.cross_attention_cache.layers[1].values"] == (1, 4, 7, 8)
    assert got["out.encoder_last_hidden_state"] == (1, 7, 32)


def test_walk_plain_model_tuple_cache():
    logits, past = plain_model()(torch.tensor([[1, 2, 3]]))
    found = frame_tensors({"logits": logits, "past": past})
    assert paths(found) == ["logits", "past[0][0]", "past[0][1]", "past[1][0]", "past[1][1]"]
    assert found[1].shape == (1, 4, 3, 8)


def test_walk_batch_encoding():
    from transformers import BatchEncoding

    inputs = BatchEncoding({"input_ids": IDS, "attention_mask": torch.ones_like(IDS)})
    assert paths(walk_tensors(inputs, "inputs")) == ["inputs['input_ids']", "inputs['attention_mask']"]


@dataclasses.dataclass
class Batch:
    tokens: torch.Tensor
    extra: dict


Pair = collections.namedtuple("Pair", "k v")


def test_walk_dataclass_namedtuple_return_types_and_objects():
    batch = Batch(torch.zeros(2, 5), {"mask": torch.ones(2, 5, dtype=torch.bool), "n": 3})
    pair = Pair(torch.zeros(1), [torch.zeros(2)])
    top = torch.zeros(3, 4).max(dim=0)
    holder = Hostile()
    holder.weights = torch.zeros(2)
    found = frame_tensors({"batch": batch, "pair": pair, "top": top, "holder": holder, "__x__": torch.zeros(1)})
    assert paths(found) == ["batch.tokens", "batch.extra['mask']", "pair.k", "pair.v[0]", "top.values",
                            "top.indices", "holder.weights"]
    assert found[1].dtype == "bool" and found[6].dtype == "f32"


def test_walk_self_containing_containers():
    lst = [torch.zeros(1)]
    lst.append(lst)
    dct = {"t": torch.zeros(2)}
    dct["me"] = dct
    dct["lst"] = lst
    found = frame_tensors({"lst": lst, "dct": dct})
    assert paths(found) == ["lst[0]", "dct['t']"]
    assert found.notes == ["dct['lst'] is lst (its 1 tensors are listed there)"]


def test_walk_hostile_objects_never_raise():
    very = VeryHostile()
    found = frame_tensors({"h": Hostile(), "v": very, "t": torch.zeros(1)})
    assert paths(found) == ["t"]
    assert walk_tensors(very, "v") == []


def test_walk_bounds_depth_and_items():
    deep = torch.zeros(1)
    for _ in range(8):
        deep = [deep]
    found = walk_tensors(deep, "d", max_depth=6)
    assert found == [] and found.unsearched == 1
    assert paths(walk_tensors(deep, "d", max_depth=8)) == ["d" + "[0]" * 8]
    many = walk_tensors([torch.zeros(1)] * 5 + [torch.ones(1) for _ in range(5)], "m", max_items=3)
    assert paths(many) == ["m[0]", "m[1]", "m[2]"] and many.left_out == 7
    assert many[1].flags == ("same as m[0]",)
    long = [0] * 2000 + [torch.zeros(1)]
    cut = walk_tensors(long, "long")
    assert cut == [] and cut.unsearched == 1


def test_modules_and_optimizers_are_summarized_not_walked():
    model = tiny_llama()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    found = frame_tensors({"model": model, "opt": opt, "self": model.model.layers[0].self_attn, "m2": model})
    assert list(found) == []
    summary = {o.path: o for o in found.objects}
    assert summary["model"].type_name == "LlamaForCausalLM" and summary["model"].params == 106816
    assert summary["model"].nbytes == 106816 * 4 + 2 * 8 * 4  # + inv_freq buffers and summary["model"].detail == "eval"
    assert summary["self"].params == 64 * 64 * 2 + 32 * 64 * 2
    assert summary["opt"].detail == "1 group, 21 params, state 0 tensors"
    assert found.notes == ["m2 is model (summarized above)"]


def test_explicit_module_lists_parameters_and_buffers():
    found = walk_tensors(tiny_llama(), "model")
    assert found[0].path == "model.model.embed_tokens.weight" and found[0].flags == ("Parameter",)
    assert "model.model.layers[1].self_attn.q_proj.weight" in paths(found)
    assert paths(found)[-2:] == ["model.model.rotary_emb.inv_freq", "model.model.rotary_emb.original_inv_freq"]


def test_meta_model_walk_reads_nothing():
    with torch.device("meta"):
        model = tiny_llama()
    out = frame_tensors({"model": model, "w": model.lm_head.weight}, stats=True)
    assert out[0].device == "meta" and out[0].stats is None and out.objects[0].devices == ("meta",)


def test_walking_without_stats_runs_no_tensor_op():
    model = tiny_llama()
    out = model(input_ids=IDS)
    local = {"out": out, "ids": IDS, "model": model, "view": IDS.t()}
    with RecordOps() as rec:
        found = frame_tensors(local)
    assert len(found) == 7 and rec.ops == []


def test_frame_tensors_skips_dunders_and_shapes_api():
    x = torch.zeros(2)
    found = shapes()
    assert "x" in paths(found)
    assert paths(shapes({"a": x})) == ["obj['a']"]
    named = {"a": x}
    assert paths(shapes(named)) == ["named['a']"]
    assert paths(shapes(x, name="mine")) == ["mine"]


# ---- statistics ------------------------------------------------------------------------------------
def test_stats_ignore_nan_inf_and_count_them():
    t = torch.tensor([1.0, float("nan"), float("inf"), -3.0, float("-inf")], dtype=torch.float16)
    s = tensor_stats(t)
    assert (s.min, s.max, s.mean, s.nan, s.inf) == (-3.0, 1.0, -1.0, 1, 2)
    assert math.isclose(s.std, math.sqrt(8), rel_tol=1e-6)


def test_stats_int_bool_empty_complex_single():
    assert tensor_stats(torch.tensor([2, 4, 6])) == TensorStats(2.0, 6.0, 4.0, 2.0, 0, 0)
    assert tensor_stats(torch.tensor([True, False, True, True])).mean == 0.75
    assert tensor_stats(torch.zeros(0, 3)) == TensorStats(None, None, None, None, 0, 0)
    assert tensor_stats(torch.tensor([3 + 4j])) == TensorStats(5.0, 5.0, 5.0, None, 0, 0, "|z|")
    assert tensor_stats(torch.tensor([float("nan")])) == TensorStats(None, None, None, None, 1, 0)
    assert tensor_stats(torch.eye(3).to_sparse()) is None


def test_stats_transfer_once():
    t = torch.randn(4, 5)
    with RecordOps() as rec:
        tensor_stats(t)
    copies_to_host = [op for op in rec.ops if "_local_scalar_dense" in op or "item" in op]
    assert copies_to_host == []
    assert tensor_stats(torch.empty(4, device="meta")) is None


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.float64])
def test_stats_precision(dtype):
    s = tensor_stats(torch.full((1000,), 0.1, dtype=dtype))
    assert math.isclose(s.mean, float(torch.tensor(0.1, dtype=dtype)), rel_tol=1e-5)
