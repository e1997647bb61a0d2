"""llmpdb.inspect.safetensors_header: the safetensors library reads headers after llmpdb's checks; llmpdb's
parser reads where the library refuses; a file both refuse names both."""

from __future__ import annotations

import json
import os
import struct

import pytest
import torch
from safetensors.torch import save_file

from llmpdb.inspect.checkpoint import CheckpointError, TensorMeta, read_checkpoint
from llmpdb.inspect.safetensors_header import library_reader, read_header

LIBRARY = library_reader()[1]


def _write(path, header, data: bytes) -> str:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return str(path)


def test_dtypes_llmpdb_never_knew_are_listed_as_torch_sees_them(tmp_path):
    path = str(tmp_path / "fp4.safetensors")
    packed = torch.arange(6, dtype=torch.uint8).reshape(2, 3).view(torch.float4_e2m1fn_x2)
    save_file({"w4": packed, "scale": torch.ones(2, dtype=torch.float8_e8m0fnu)}, path, {"quant": "mxfp4"})
    header = read_header(path)
    assert header.reader == LIBRARY and header.refused == ""
    assert header.tensors == {"w4": ("float4_e2m1fn_x2", (2, 3)), "scale": ("float8_e8m0fnu", (2,))}
    assert header.metadata == {"quant": "mxfp4"}
    assert read_checkpoint(path).tensors["w4"] == TensorMeta((2, 3), "float4_e2m1fn_x2")
    with pytest.raises(CheckpointError, match=r"'w4': unknown dtype 'F4'"):  # what llmpdb's parser alone says
        read_header(path, use_library=False)


def test_a_code_torch_has_no_dtype_for_is_shown_as_written(tmp_path):
    path = _write(tmp_path / "fp6.safetensors", {"w": {"dtype": "F6_E2M3", "shape": [4], "data_offsets": [0, 3]}},
                  bytes(3))
    assert read_header(path).tensors == {"w": ("F6_E2M3", (4,))}


def test_a_file_the_library_refuses_is_read_by_llmpdb_and_says_so(tmp_path):
    # a gap before the data: the library wants every byte covered, llmpdb's parser allows it
    path = _write(tmp_path / "gap.safetensors", {"w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}},
                  bytes(8))
    header = read_header(path)
    assert header.reader == "llmpdb" and header.tensors == {"w": ("float32", (1,))}
    assert header.refused.startswith(f"{LIBRARY} refused it: ")
    info = read_checkpoint(path)
    assert info.notes == [f"gap.safetensors: read by llmpdb's parser: {header.refused}"]


def test_metadata_that_could_hide_a_second_tensor_of_one_name_goes_to_llmpdb(tmp_path):
    header = {"w": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}, "__metadata__": {"data_offsets": "x"}}
    read = read_header(_write(tmp_path / "m.safetensors", header, bytes(2)))
    assert (read.reader, read.tensors, read.metadata) == ("llmpdb", {"w": ("uint8", (2,))}, {"data_offsets": "x"})


@pytest.mark.parametrize("header, data, expected", [
    ({"w": {"dtype": "F32", "shape": [2**62, 2**62], "data_offsets": [0, 4]}}, bytes(4),
     "'w' spans bytes 0..4 but shape (4611686018427387904, 4611686018427387904) of float32 needs"),
    ({"w": {"dtype": "F32", "shape": [2**40], "data_offsets": [0, 2**42]}}, bytes(8),
     "truncated: 'w' ends at byte 4398046511104 of the data but the file holds 8"),
    (b'{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "w": {"dtype": "U8", "shape": [4], '
     b'"data_offsets": [0, 4]}}', bytes(4), "refused: duplicate key 'w' in the safetensors header"),
], ids=["overflowing-shape", "claims-4TiB", "one-name-twice"])
def test_lying_headers_are_one_refusal(tmp_path, header, data, expected):
    path = _write(tmp_path / "lie.safetensors", header, data)
    with pytest.raises(CheckpointError) as err:
        read_header(path)
    assert str(err.value).startswith(f"lie.safetensors: {expected}") and "\n" not in str(err.value)


def test_the_length_is_checked_before_the_library_opens_the_file(tmp_path):
    path = tmp_path / "huge.safetensors"
    path.write_bytes(struct.pack("<Q", 2**63) + b"{}")
    with pytest.raises(CheckpointError, match=r"header length 9223372036854775808 bytes is larger than the file"):
        read_header(str(path))


def test_a_fifo_is_refused_without_opening_it(tmp_path):
    fifo = str(tmp_path / "pipe.safetensors")
    os.mkfifo(fifo)  # no writer: an open or read would block forever
    with pytest.raises(CheckpointError, match=r"pipe.safetensors: refused: a FIFO \(named pipe\)"):
        read_header(fifo)


def test_the_library_reads_a_private_copy_of_the_checked_header(tmp_path, monkeypatch):
    path = str(tmp_path / "ok.safetensors")
    save_file({"a": torch.zeros(3)}, path)
    copies = tmp_path / "tmp"
    copies.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(copies))
    assert read_header(path).reader == LIBRARY and os.listdir(copies) == []  # made, read, removed
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "gone"))  # no temp file can be made
    header = read_header(path)  # llmpdb's parser reads, and says why
    assert header.reader == "llmpdb" and header.tensors == {"a": ("float32", (3,))}
    assert header.refused == f"{LIBRARY} not used: no temp file for its copy of the header (No such file or directory)"
