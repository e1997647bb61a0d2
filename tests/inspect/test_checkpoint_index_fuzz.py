"""Fuzz the shard index (``model.safetensors.index.json``, read by ``inspect.checkpoint.read_checkpoint``,
which ``statediff`` uses) with ``hypothesis``: any bytes, any JSON, weight maps whose shard names climb out
(``../``), are absolute, hold NUL or name absent files. Only ``CheckpointError`` (one line) or a
``CheckpointInfo`` comes out, nothing outside the folder is read, and each example is a few KiB."""

from __future__ import annotations

import json
import os
import tempfile

import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from llmpdb.files.safetensors_file import write_safetensors
from llmpdb.inspect.checkpoint import CheckpointInfo, read_checkpoint
from llmpdb.inspect.checkpoint_guard import CheckpointError

FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SHARDS = st.sampled_from(["model-1.safetensors", "../model-1.safetensors", "/etc/passwd", "a\x00b", "", ".",
                          "sub/../model-1.safetensors", "absent.safetensors", "outside.safetensors"])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(), st.text(max_size=6))
JSONISH = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                            max_size=3), max_leaves=8)
INDEX = st.one_of(
    st.fixed_dictionaries({"weight_map": st.dictionaries(st.text(max_size=6), SHARDS | JSONISH, max_size=4)},
                          optional={"metadata": JSONISH}),
    st.dictionaries(st.sampled_from(["weight_map", "metadata", "x"]), JSONISH, max_size=2), JSONISH)


def _folder() -> str:
    folder = tempfile.mkdtemp()
    write_safetensors(os.path.join(folder, "model-1.safetensors"), [("w", torch.ones(2))])
    os.symlink(os.path.join(os.path.dirname(folder), "elsewhere.safetensors"),
               os.path.join(folder, "outside.safetensors"))
    return folder


def _check(folder: str, raw: bytes) -> None:
    index = os.path.join(folder, "model.safetensors.index.json")
    with open(index, "wb") as fh:
        fh.write(raw)
    try:
        info = read_checkpoint(index)
    except CheckpointError as exc:
        assert "\n" not in str(exc), str(exc)
    else:
        assert isinstance(info, CheckpointInfo) and all(os.path.dirname(f) == folder for f in info.files)
    finally:
        for name in os.listdir(folder):
            os.unlink(os.path.join(folder, name))
        os.rmdir(folder)


@FUZZ
@given(INDEX)
@example({"weight_map": {"w": "model-1.safetensors"}})
@example({"weight_map": {"w": "../model-1.safetensors"}})
@example({"weight_map": {"w": "outside.safetensors"}})
@example({"weight_map": {"w": "a\x00b"}})
@example({"weight_map": {"w": 1e400}})
@example({"weight_map": {"w": ["model-1.safetensors"]}})
@example({"weight_map": []})
def test_any_index_gives_the_checkpoint_or_one_refusal(index):
    _check(_folder(), json.dumps(index).encode())


@FUZZ
@given(st.binary(max_size=120))
@example(b'{"weight_map": {"w": "model-1.safetensors", "w": "x"}}')  # a duplicate key
@example(b"[" * 100000)  # nested too deep
@example(b'{"weight_map": {"w": "model-1.safetensors"}, "n": ' + b"9" * 5000 + b"}")
@example(b"\xff{}")
def test_any_bytes_as_an_index_give_one_refusal(raw):
    _check(_folder(), raw)
