"""Fuzz llmpdb's safetensors reader (``files.safetensors_file.read_safetensors``, copied and mapped), the
header check (``inspect.checkpoint_guard.parse_safetensors_header``) and the header reader that hands the file
to the safetensors library (``inspect.safetensors_header.read_header``) with ``hypothesis``: lying lengths,
huge header sizes, bad JSON, duplicate keys, offsets out of range, bad dtypes and shapes. The one
documented refusal is ``CheckpointError`` (one line); nothing else comes out, and memory stays bounded
(every file here is a few KiB, whatever its header claims)."""

from __future__ import annotations

import json
import os
import struct
import tempfile

import torch  # imported at collection: the first example pays no import

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from llmpdb.files.safetensors_file import CheckpointError, read_safetensors
from llmpdb.inspect.checkpoint_guard import parse_safetensors_header
from llmpdb.inspect.safetensors_header import read_header

FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

DTYPES = st.sampled_from(["F32", "F16", "BF16", "U8", "I64", "BOOL", "F8_E4M3", "C64", "F64", "Q4", "", "f32"])
NUMBERS = st.one_of(st.integers(-3, 70), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                    st.sampled_from([True, None, "4", 1.5]))
SHAPES = st.one_of(st.lists(st.integers(0, 9), max_size=4), st.lists(NUMBERS, max_size=3), NUMBERS)
OFFSETS = st.one_of(st.tuples(st.integers(0, 300), st.integers(0, 300)).map(list),
                    st.lists(NUMBERS, max_size=3), NUMBERS)
ENTRY = st.one_of(st.fixed_dictionaries({"dtype": DTYPES, "shape": SHAPES, "data_offsets": OFFSETS}),
                  st.dictionaries(st.sampled_from(["dtype", "shape", "data_offsets", "x"]), NUMBERS, max_size=3),
                  NUMBERS)
KEYS = st.text(st.sampled_from("ab._[]0'\"_\n\\"), min_size=0, max_size=12)
METADATA = st.one_of(st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
                     st.dictionaries(st.text(max_size=5), NUMBERS, max_size=2), NUMBERS)


def _raw(header: dict, pad: int) -> bytes:
    return json.dumps(header, allow_nan=True).encode() + b" " * pad


def _file(raw: bytes, length: int, data: bytes) -> str:
    fd, path = tempfile.mkstemp(suffix=".safetensors")
    with os.fdopen(fd, "wb") as fh:
        fh.write(struct.pack("<Q", length) + raw + data)
    return path


def _read_both(path: str) -> None:
    try:
        for mapped in (False, True):
            try:
                tensors, metadata = read_safetensors(path, mapped=mapped)
            except CheckpointError as exc:
                assert "\n" not in str(exc), str(exc)
                continue
            assert isinstance(metadata, dict)
            for t in tensors.values():
                assert isinstance(t, torch.Tensor) and t.device.type == "cpu"
                t.view(torch.uint8).sum() if t.numel() and t.dim() and t.dtype != torch.bool else None  # touch it
        for use_library in (True, False):  # the library never takes the process down, whatever the header
            try:
                header = read_header(path, use_library=use_library)
            except CheckpointError as exc:
                assert "\n" not in str(exc), str(exc)
                continue
            assert all(type(shape) is tuple and all(type(d) is int for d in shape)
                       for _, shape in header.tensors.values())
    finally:
        os.unlink(path)


@FUZZ
@given(st.dictionaries(KEYS, ENTRY, max_size=4), METADATA, st.integers(0, 400), st.integers(0, 7))
@example({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, {}, 8, 0)
@example({"a": {"dtype": "F32", "shape": [1], "data_offsets": [1, 5]}}, {}, 8, 0)  # unaligned: still read
@example({"a": {"dtype": "F32", "shape": [2**40], "data_offsets": [0, 2**42]}}, {}, 8, 0)  # claims 4 TiB
@example({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
          "b": {"dtype": "U8", "shape": [4], "data_offsets": [12, 16]}}, {}, 16, 0)  # shared bytes
def test_structured_headers_give_tensors_or_one_refusal(header, metadata, data_size, pad):
    header = dict(header)
    if metadata != {}:
        header["__metadata__"] = metadata
    raw = _raw(header, pad)
    _read_both(_file(raw, len(raw), bytes(range(256)) * 2 if data_size > 256 else bytes(data_size)))
    try:
        parse_safetensors_header(raw, data_size, "x.safetensors")
    except CheckpointError:
        pass


@FUZZ
@given(st.binary(max_size=200), st.one_of(st.integers(0, 2**64 - 1), st.integers(0, 300)), st.binary(max_size=64))
@example(b'{"a": 1, "a": 2}', 16, b"")  # a duplicate key
@example(b"[" * 5000 + b"]" * 5000, 10000, b"")  # nested too deep
@example(b'{"a": {"dtype": "F32", "shape": [1e400], "data_offsets": [0, 4]}}', 66, b"abcd")
@example(b'{"a": {"dtype": "F32", "shape": [' + b"9" * 5000 + b'], "data_offsets": [0, 4]}}', 5069, b"")
@example(b'{"a": NaN}', 10, b"")
@example(b"\xff\xfe{}", 4, b"")  # not UTF-8
@example(b"{}", 2**64 - 1, b"")  # a header length of 16 EiB
@example(b"{}", 10**9, b"")  # a header that claims 1 GB in a tiny file
def test_raw_bytes_and_lying_lengths_give_one_refusal(raw, length, data):
    _read_both(_file(raw, length, data))
    try:
        parse_safetensors_header(raw, len(data), "x.safetensors")
    except CheckpointError:
        pass


@FUZZ
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=4),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                    max_leaves=12))
def test_any_json_document_as_a_header_gives_one_refusal_or_tensors(doc):
    raw = json.dumps(doc).encode()
    _read_both(_file(raw, len(raw), b"\0" * 32))
