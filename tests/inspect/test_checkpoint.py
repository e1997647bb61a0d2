"""llmpdb.inspect.checkpoint: metadata of safetensors files, sharded folders and pickles, safely."""

from __future__ import annotations

import json
import os
import struct

import pytest
import torch
from safetensors.torch import save_file

from llmpdb.inspect.checkpoint import (
    CheckpointError,
    TensorMeta,
    find_state_dict,
    read_checkpoint,
    read_pickle_checkpoint,
    read_safetensors_header,
)
from llmpdb.inspect.safetensors_header import library_reader

LIBRARY = library_reader()[1]  # "safetensors 0.8.0": it reads headers, after llmpdb's checks
MARKER_ENV = "LLMPDB_TEST_MARKER"


def _touch(path: str) -> str:
    """What a malicious pickle would run: create a file."""
    with open(path, "w") as fh:
        fh.write("executed")
    return path


class Evil:
    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (_touch, (self.marker,))


def _weights():
    return {
        "embed.weight": torch.randn(8, 4),
        "norm.weight": torch.ones(4, dtype=torch.bfloat16),
        "ids": torch.arange(3),
        "mask": torch.tensor([True, False]),
    }


def test_safetensors_header_names_shapes_dtypes_and_metadata(tmp_path):
    path = str(tmp_path / "m.safetensors")
    save_file(_weights(), path, metadata={"format": "pt"})
    tensors, metadata = read_safetensors_header(path)
    assert tensors == {
        "embed.weight": TensorMeta((8, 4), "float32"),
        "norm.weight": TensorMeta((4,), "bfloat16"),
        "ids": TensorMeta((3,), "int64"),
        "mask": TensorMeta((2,), "bool"),
    }
    assert metadata == {"format": "pt"}


def test_safetensors_data_bytes_are_not_parsed(tmp_path):
    path = str(tmp_path / "m.safetensors")
    save_file({"w": torch.zeros(64, 64)}, path)
    with open(path, "rb") as fh:
        (length,) = struct.unpack("<Q", fh.read(8))
    with open(path, "r+b") as fh:  # garbage in the data section: a header-only reader does not care
        fh.seek(8 + length)
        fh.write(b"\xff" * 1024)
    assert read_checkpoint(path).tensors == {"w": TensorMeta((64, 64), "float32")}


def test_truncated_safetensors(tmp_path):
    path = str(tmp_path / "cut.safetensors")
    save_file({"a": torch.zeros(10), "b": torch.zeros(20)}, path)
    size = os.path.getsize(path)
    with open(path, "r+b") as fh:
        fh.truncate(size - 16)
    with pytest.raises(CheckpointError) as err:
        read_checkpoint(path)
    assert str(err.value) == ("cut.safetensors: truncated: 'b' ends at byte 120 of the data but the file holds 104 "
                              f"({LIBRARY} refuses it too)")


def test_header_length_larger_than_file(tmp_path):
    path = tmp_path / "big.safetensors"
    path.write_bytes(struct.pack("<Q", 1_000_000) + b'{"a": 1}')
    with pytest.raises(CheckpointError) as err:
        read_safetensors_header(str(path))
    assert str(err.value) == (
        "big.safetensors: header length 1000000 bytes is larger than the file (16 bytes): "
        "truncated or not a safetensors file"
    )


def test_bad_json_header_and_tiny_file(tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(struct.pack("<Q", 6) + b"{oops}")
    with pytest.raises(CheckpointError) as err:
        read_checkpoint(str(bad))
    assert str(err.value).startswith("bad.safetensors: safetensors header is not valid JSON (Expecting property")
    tiny = tmp_path / "tiny.safetensors"
    tiny.write_bytes(b"\x01\x02")
    with pytest.raises(CheckpointError, match=r"^tiny.safetensors: truncated safetensors file \(2 bytes"):
        read_checkpoint(str(tiny))


def test_header_entry_with_wrong_byte_span(tmp_path):
    header = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}}).encode()
    path = tmp_path / "span.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 8)
    with pytest.raises(CheckpointError) as err:
        read_checkpoint(str(path))
    assert str(err.value) == (f"span.safetensors: 'w' spans bytes 0..8 but shape (4,) of float32 needs 16 ({LIBRARY} "
                              "refuses it too)")


def _sharded(folder):
    weights = _weights()
    first = str(folder / "model-00001-of-00002.safetensors")
    save_file({k: weights[k] for k in ("embed.weight", "norm.weight")}, first)
    save_file({k: weights[k] for k in ("ids", "mask")}, str(folder / "model-00002-of-00002.safetensors"))
    weight_map = {"embed.weight": "model-00001-of-00002.safetensors", "norm.weight": "model-00001-of-00002.safetensors",
                  "ids": "model-00002-of-00002.safetensors", "mask": "model-00002-of-00002.safetensors"}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return weight_map


def test_sharded_folder_and_its_index(tmp_path):
    _sharded(tmp_path)
    for target in (tmp_path, tmp_path / "model.safetensors.index.json"):
        info = read_checkpoint(target)
        assert info.kind == "safetensors"
        assert sorted(info.tensors) == ["embed.weight", "ids", "mask", "norm.weight"]
        assert [os.path.basename(f) for f in info.files] == [
            "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
        assert info.notes == []


def test_index_inconsistencies(tmp_path):
    weight_map = _sharded(tmp_path)
    weight_map["ghost.weight"] = "model-00001-of-00002.safetensors"
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    info = read_checkpoint(tmp_path)
    assert info.notes == ["index lists 1 key(s) no shard holds (e.g. ghost.weight)"]
    weight_map["x"] = "model-00003-of-00003.safetensors"
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(CheckpointError, match=r"1 shard\(s\) listed but absent: model-00003-of-00003"):
        read_checkpoint(tmp_path)


def test_nested_model_state_dict_pt(tmp_path):
    path = tmp_path / "ckpt.pt"
    torch.save({"model_state_dict": _weights(), "optimizer_state_dict": {"state": {}}, "step": 3}, path)
    info = read_checkpoint(path)
    assert info.kind == "pickle" and info.nested_under == "model_state_dict"
    assert info.tensors["embed.weight"] == TensorMeta((8, 4), "float32")
    assert len(info.tensors) == 4


def test_nested_twice_and_top_level_extras(tmp_path):
    path = tmp_path / "lightning.ckpt"
    torch.save({"state_dict": {"model": _weights()}, "step": torch.tensor(5)}, path)
    info = read_checkpoint(path)
    assert info.nested_under == "state_dict.model" and len(info.tensors) == 4
    flat = tmp_path / "flat.bin"
    torch.save({**_weights(), "epoch": 2}, flat)
    info = read_checkpoint(flat)
    assert info.nested_under is None and info.notes == ["ignored 1 non-tensor entries (epoch)"]


def test_legacy_non_zip_pickle_is_read_on_meta(tmp_path):
    path = tmp_path / "legacy.pth"
    torch.save(_weights(), path, _use_new_zipfile_serialization=False)
    info = read_pickle_checkpoint(str(path))
    assert info.tensors["norm.weight"] == TensorMeta((4,), "bfloat16")


def test_pickle_with_custom_class_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"w": torch.zeros(2), "payload": Evil(str(marker))}, path)
    assert not marker.exists()
    with pytest.raises(CheckpointError) as err:
        read_checkpoint(path)
    assert not marker.exists()
    message = str(err.value)
    assert "\n" not in message
    assert message == f"evil.pt: refused: this pickle would run code ({_touch.__module__}._touch); `--unsafe-trusted` loads it"
    # the explicit opt-in does run it: the refusal above is what kept the file from being created
    info = read_checkpoint(path, unsafe_trusted=True)
    assert marker.exists() and info.tensors == {"w": TensorMeta((2,), "float32")}


def test_not_a_checkpoint_and_missing_paths(tmp_path):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"this is not a pickle at all")
    with pytest.raises(CheckpointError, match=r"^junk.bin: "):
        read_checkpoint(junk)
    with pytest.raises(CheckpointError, match=r"nope.pt: no such file or folder$"):
        read_checkpoint(tmp_path / "nope.pt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match=r"^empty: no \*.safetensors, \*.bin, \*.pt or \*.index.json"):
        read_checkpoint(tmp_path / "empty")
    no_tensors = tmp_path / "meta.pt"
    torch.save({"step": 1, "lr": 0.1}, no_tensors)
    with pytest.raises(CheckpointError, match=r"^meta.pt: no tensors found \(top-level keys: step, lr\)$"):
        read_checkpoint(no_tensors)


def test_bin_folder_without_index(tmp_path):
    torch.save({"a": torch.zeros(2)}, tmp_path / "pytorch_model-1.bin")
    torch.save({"b": torch.zeros(3)}, tmp_path / "pytorch_model-2.bin")
    info = read_checkpoint(tmp_path)
    assert info.tensors == {"a": TensorMeta((2,), "float32"), "b": TensorMeta((3,), "float32")}


def test_find_state_dict_prefers_the_nested_weights():
    sd = _weights()
    tensors, nested, notes = find_state_dict({"model": sd, "step": torch.tensor(1)}, "x")
    assert nested == "model" and set(tensors) == set(sd) and notes == []
