"""A stop, ``shapes``, ``kv`` and ``sm`` run none of the user's code: no property, ``__getattr__``,
``__getattribute__`` or ``__class__`` of a local is asked anything (plain pdb asks nothing either).

The locals are hostile on purpose: an object that records every attribute access, a lazy dataset wrapper
whose properties take 3 s each (named like what llmpdb looks for: ``layers``, ``config``, ``key_cache``...),
a ``MagicMock`` (answers everything), a proxy whose ``__getattr__`` forwards to a real model, and an object
whose ``__class__`` property raises. Real tensors, a real ``DynamicCache`` and a real model sit next to them
and must still show.
"""

from __future__ import annotations

import re
import time
from collections import ChainMap
from collections.abc import Mapping
from unittest import mock

import pytest
import torch
from torch import nn
from transformers import DynamicCache

from tiny_models import tiny_llama
from transcript import debug_transcript

from llmpdb.session import SESSION

PROMPT = "(llmpdb) "
ACCESSES: list[str] = []
LOOKED_FOR = ("layers", "config", "self_attention_cache", "cross_attention_cache", "key_cache", "value_cache",
              "conv_states", "ssm_states", "keys", "values", "cache", "past_key_values", "data", "module",
              "get_seq_length", "named_modules", "forward", "training", "shape", "dtype", "layer_idx")


@pytest.fixture(autouse=True)
def fresh_session():
    SESSION.reset()
    ACCESSES.clear()
    yield
    SESSION.reset()


def answers(transcript: str) -> list[str]:
    return [part.rstrip("\n") for part in transcript.split(PROMPT)[1:]]


def row(table: str, path: str) -> list[str]:
    """The cells of the row whose first column is ``path`` (split on runs of two spaces), or []."""
    for line in table.splitlines():
        cells = [c.strip() for c in re.split(r"\s{2,}", line.strip())]
        if cells and cells[0] == path:
            return cells
    return []


class Recorder:
    """Records every attribute access made on it (``isinstance`` reading ``__class__`` included)."""

    def __getattribute__(self, name):
        ACCESSES.append(f"Recorder.{name}")
        return object.__getattribute__(self, name)

    def __getattr__(self, name):
        ACCESSES.append(f"Recorder.__getattr__({name})")
        raise AttributeError(name)


def _slow(name):
    def read(self):
        ACCESSES.append(f"LazyDataset.{name}")
        time.sleep(3)
        return [torch.zeros(1, 2, 3, 4)]
    return property(read)


class LazyDataset:
    """A lazy wrapper: every property llmpdb might look for loads for 3 s; anything else too."""

    def __init__(self):
        self.path = "/data/shard-0"

    def __getattr__(self, name):
        ACCESSES.append(f"LazyDataset.__getattr__({name})")
        time.sleep(3)
        raise AttributeError(name)


for _name in LOOKED_FOR:
    setattr(LazyDataset, _name, _slow(_name))


class Proxy:
    """Forwards every attribute to its target (a real model), recording each forward."""

    def __init__(self, target):
        object.__setattr__(self, "_target", target)

    def __getattr__(self, name):
        ACCESSES.append(f"Proxy.{name}")
        return getattr(object.__getattribute__(self, "_target"), name)


class LazyShards(Mapping):
    """A user's Mapping that loads a shard (3 s) for every key it is asked for."""

    def __getitem__(self, key):
        ACCESSES.append(f"LazyShards[{key!r}]")
        time.sleep(3)
        return torch.zeros(2)

    def __iter__(self):
        ACCESSES.append("LazyShards.__iter__")
        return iter(["shard-0"])

    def __len__(self):
        ACCESSES.append("LazyShards.__len__")
        return 1

    @property
    def data(self):  # UserDict's attribute name: the dims namer looks for input_ids in `.data`
        ACCESSES.append("LazyShards.data")
        time.sleep(3)
        return {"input_ids": torch.zeros(1, 7)}


class Hashy:
    """A dict key whose __hash__ and __eq__ record (a debugger that hashes the keys shows up here)."""

    def __hash__(self):
        ACCESSES.append("Hashy.__hash__")
        return 1

    def __eq__(self, other):
        ACCESSES.append("Hashy.__eq__")
        return self is other


class NoClass:
    """An object whose ``__class__`` property raises."""

    @property
    def __class__(self):
        ACCESSES.append("NoClass.__class__")
        raise RuntimeError("no class for you")


def real_cache():
    cache = DynamicCache()
    for layer in range(2):
        cache.update(torch.zeros(1, 2, 5, 16), torch.zeros(1, 2, 5, 16), layer)
    return cache


def hostile_script_frame(timings):
    recorder, lazy, mocked, no_class, shards = Recorder(), LazyDataset(), mock.MagicMock(), NoClass(), LazyShards()
    env = ChainMap({"a": torch.ones(3)})  # a standard-library Mapping: read as usual
    model_kwargs = {Hashy(): torch.ones(1)}  # kv looks into model_kwargs; shapes walks it
    model = tiny_llama()
    proxy = Proxy(model)
    kv_state = real_cache()  # found by scanning every local, after each hostile one was looked at
    x = torch.zeros(2, 3)
    ACCESSES.clear()
    start = time.perf_counter()
    breakpoint()
    timings.append(time.perf_counter() - start)
    return x, kv_state, recorder, lazy, mocked, proxy, no_class, shards, env, model_kwargs


def test_a_stop_asks_the_locals_nothing_and_takes_no_time():
    timings: list[float] = []
    debug_transcript(hostile_script_frame, ["c", "c"], timings)
    assert ACCESSES == []
    assert timings and timings[0] < 0.5  # a property read would sleep 3 s


def test_shapes_kv_sm_ask_the_locals_nothing_and_still_show_the_real_ones():
    seen: list[object] = []

    def frame():
        out = hostile_script_frame([])
        seen.append(out[4])  # the mock

    out = answers(debug_transcript(frame, ["c", "shapes", "kv", "sm", "c"]))
    assert ACCESSES == []
    assert seen[0].mock_calls == [] and seen[0]._mock_children == {}  # the mock was never asked either
    shapes, kv, sm = out[1], out[2], out[3]
    assert row(shapes, "x")[1:3] == ["(2, 3)", "f32"]
    assert row(shapes, "kv_state.layers[1].values")[1] == "(1, 2, 5, 16)"
    assert row(shapes, "model")[1] == "LlamaForCausalLM"
    assert row(shapes, "env['a']")[1] == "(3,)" and row(shapes, "model_kwargs[<Hashy>]")[1] == "(1,)"
    assert "shards: a LazyShards (Mapping) is not entered: `shapes shards` reads it" in shapes
    assert kv.startswith("kv_state: DynamicCache  2 layers  seq 5 (filled)")
    assert "hostile_script_frame()" in sm
    assert "internal error" not in "".join(out)


class Block(nn.Module):
    """A module whose forward holds lazy locals named like a cache and a config, with a property of its own."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    @property
    def layer_idx(self):
        ACCESSES.append("Block.layer_idx")
        time.sleep(3)
        return 0

    def forward(self, x):
        cache, config, past = LazyDataset(), LazyDataset(), Recorder()
        ACCESSES.clear()
        breakpoint()
        return self.proj(x), cache, config, past


def test_the_path_line_in_a_forward_asks_a_lazy_cache_nothing():
    block = Block()
    start = time.perf_counter()
    transcript = debug_transcript(lambda: block(torch.zeros(1, 4)), ["c", "shapes", "kv", "sm", "c"])
    assert ACCESSES == []
    assert time.perf_counter() - start < 3
    header = next(line for line in transcript.splitlines() if line.startswith("path:"))
    assert "LazyDataset" not in header and "Recorder" not in header  # they are not caches
    assert "(Block)" in header
    out = answers(transcript)
    assert row(out[1], "x")[1] == "(1, 4)" and row(out[1], "self")[1] == "Block"
    assert out[2].startswith("*** kv: no KV cache in this frame")


def no_class_frame():
    model = tiny_llama()
    past_key_values = real_cache()
    ids = torch.ones(1, 5, dtype=torch.long)
    bad = NoClass()
    breakpoint()
    return model, past_key_values, ids, bad


def test_an_object_whose_class_raises_blanks_no_command():
    """Every model-aware command shows what it finds; the hostile object is passed over, not a crash."""
    out = answers(debug_transcript(no_class_frame, [
        "c", "shapes", "kv", "root-model", "wf", "bm layers.0.mlp", "sm", "clear-module all", "c"]))
    assert ACCESSES == []
    shapes, kv, root, wf, bm, sm = out[1:7]
    for text in out[1:7]:
        assert "internal error" not in text and "RuntimeError" not in text, text
    assert row(shapes, "ids")[1] == "(1, 5)" and row(shapes, "model")[1] == "LlamaForCausalLM"
    assert row(shapes, "past_key_values.layers[1].values")[1] == "(1, 2, 5, 16)"
    assert kv.startswith("past_key_values: DynamicCache  2 layers  seq 5 (filled)")
    assert root.startswith("root-model: LlamaForCausalLM")
    assert wf.startswith("LlamaForCausalLM.forward")
    assert bm == "module breakpoint 1: layers.0.mlp -> model.layers.0.mlp"
    assert "no_class_frame()" in sm


class Exploding(torch.Tensor):
    """A tensor subclass whose every torch function raises (its rank, its shape, anything)."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        raise RuntimeError("boom")


def exploding_frame():
    exploding = [(torch.zeros(1, 2, 3, 4).as_subclass(Exploding),) * 2]  # looks like a one-layer tuple cache
    kv_state = real_cache()
    ids = torch.ones(1, 5, dtype=torch.long)
    breakpoint()
    return exploding, kv_state, ids


def test_a_local_that_raises_when_looked_at_is_skipped_with_a_note():
    out = answers(debug_transcript(exploding_frame, ["c", "kv", "shapes", "c"]))
    kv, shapes = out[1], out[2]
    assert kv.splitlines()[0] == "skipped exploding (RuntimeError): raised while looked at"
    assert kv.splitlines()[1].startswith("kv_state: DynamicCache  2 layers  seq 5 (filled)")
    assert row(shapes, "ids")[1] == "(1, 5)" and row(shapes, "kv_state.layers[0].keys")[1] == "(1, 2, 5, 16)"
    assert "exploding[0][0]: not searched (RuntimeError: boom)" in shapes


class TakesAnything(nn.Module):
    """A module whose first argument is whatever the caller passes (here: an object whose __class__ raises)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, extra, x):
        breakpoint()
        return self.proj(x)


def run_takes_anything():
    return TakesAnything()(NoClass(), torch.zeros(1, 4))


def test_hostile_forward_argument():
    """An argument whose __class__ raises blanks neither the path line nor sm, root-model, bm, wf, shapes."""
    transcript = debug_transcript(run_takes_anything, [
        "c", "sm", "root-model", "bm proj", "wf", "shapes", "clear-module all", "c"])
    assert "failed" not in transcript and "internal error" not in transcript, transcript
    assert ACCESSES == []
    assert "path: train, grad | (root) (TakesAnything)" in transcript
    sm, root, bm, wf, shapes = answers(transcript)[1:6]
    current = next(line for line in sm.splitlines() if line.startswith(">#"))
    assert "TakesAnything" in current and current.endswith("x (1, 4) f32")  # the first tensor argument
    assert root.startswith("root-model: TakesAnything")
    assert bm == "module breakpoint 1: proj -> proj"
    assert wf.startswith("TakesAnything.forward")
    assert row(shapes, "x")[1] == "(1, 4)"
