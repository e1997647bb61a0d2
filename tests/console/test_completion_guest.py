"""TAB completion is a guest: completing ``obj.<TAB>``/``d['<TAB>`` runs none of the object's own code."""

from __future__ import annotations

import time
from unittest import mock

import torch

from llmpdb.console.completion import CompletionContext, completions


def _texts(line, names):
    return [c.text for c in completions(line, CompletionContext(namespace=names))]


class Recorder:
    """Every hook a lookup could run records itself and raises."""

    seen: list = []

    def __getattribute__(self, name):
        Recorder.seen.append(("getattribute", name))
        raise RuntimeError("guest code ran")

    def __getattr__(self, name):
        Recorder.seen.append(("getattr", name))
        raise RuntimeError("guest code ran")

    def __dir__(self):
        Recorder.seen.append(("dir",))
        raise RuntimeError("guest code ran")

    def __len__(self):
        Recorder.seen.append(("len",))
        raise RuntimeError("guest code ran")

    @property
    def __class__(self):
        Recorder.seen.append(("__class__",))
        raise RuntimeError("guest code ran")

    @property
    def weights(self):
        Recorder.seen.append(("weights",))
        raise RuntimeError("guest code ran")

    def method(self):
        return 1


class Sneaky:
    """``__class__`` lies and ``__dict__`` is a property: neither may run."""

    seen: list = []

    @property
    def __class__(self):
        Sneaky.seen.append("__class__")
        return dict

    @property
    def __dict__(self):
        Sneaky.seen.append("__dict__")
        return {"fake": 1}

    def real(self):
        return 1


class KeyedDict(dict):
    seen: list = []

    def keys(self):
        KeyedDict.seen.append("keys")
        raise RuntimeError("guest code ran")

    def __iter__(self):
        KeyedDict.seen.append("iter")
        raise RuntimeError("guest code ran")

    def __len__(self):
        KeyedDict.seen.append("len")
        raise RuntimeError("guest code ran")


class Slow:
    def __init__(self):
        self.plain = 1

    @property
    def slow(self):
        time.sleep(5)
        return torch.zeros(2)


def test_recording_object_records_nothing():
    Recorder.seen.clear()
    obj = object.__new__(Recorder)
    names = {"obj": obj, "box": {"inner": obj}}
    assert "method" in _texts("p obj.", names) and "weights" in _texts("p obj.w", names)
    assert _texts("p obj.weights.", names) == []
    assert _texts("p obj.method.__na", names) == []  # a method would have to be bound: nothing
    assert _texts("p box['inner'].me", names) == ["method"]
    assert _texts("p obj['", names) == []
    assert Recorder.seen == []


def test_class_and_dict_properties_do_not_run():
    Sneaky.seen.clear()
    names = {"s": Sneaky(), "items": [Sneaky()]}
    assert "real" in _texts("p s.", names) and "fake" not in _texts("p s.", names)
    assert _texts("p s['", names) == []
    assert _texts("p items[0].re", names) == ["real"]
    assert Sneaky.seen == []


def test_dict_subclass_overriding_keys_offers_nothing_and_runs_nothing():
    KeyedDict.seen.clear()
    d = KeyedDict(alpha=1)
    assert _texts("p d['", {"d": d}) == []
    assert _texts("p d.ke", {"d": d}) == ["keys"]
    assert KeyedDict.seen == []
    from collections import OrderedDict, defaultdict
    assert _texts("p o['", {"o": OrderedDict(b=1, a=2)}) == ["'a']", "'b']"]
    assert _texts("p o['", {"o": defaultdict(int, x=1)}) == ["'x']"]


def test_slow_property_is_not_called():
    names = {"s": Slow()}
    began = time.monotonic()
    assert _texts("p s.", names) == ["plain", "slow"]
    assert _texts("p s.slow.sh", names) == []
    assert time.monotonic() - began < 1.0


def test_mock_makes_no_child_mocks():
    m = mock.Mock()
    names = {"m": m}
    _texts("p m.", names)
    assert _texts("p m.anything.", names) == []
    assert _texts("p m['", names) == []
    assert m._mock_children == {} and m.mock_calls == []


def test_model_output_and_batch_encoding_keys():
    from transformers import BatchEncoding
    from transformers.modeling_outputs import CausalLMOutputWithPast

    out = CausalLMOutputWithPast(logits=torch.zeros(1, 2, 3))
    enc = BatchEncoding({"input_ids": torch.tensor([[1]]), "attention_mask": torch.tensor([[1]])})
    names = {"out": out, "enc": enc}
    assert _texts("p out['", names) == ["'logits']"]
    assert _texts("p out.lo", names) == ["logits"]
    assert "shape" in _texts("p out.logits.sh", names)
    assert _texts("p enc['", names) == ["'attention_mask']", "'input_ids']"]
    assert "shape" in _texts("p enc['input_ids'].sh", names)
