"""Write tensors to a ``.safetensors`` file and read one back, without the ``safetensors`` package or pickle.

Usage::

    size = write_safetensors("out.safetensors", [("outputs.logits", t), ...], {"llmpdb": "{...}"})
    reason = refusal(t)            # None, or why a tensor cannot be written ("a meta tensor: no data")
    tensors, metadata = read_safetensors("out.safetensors")   # {name: CPU tensor}, {str: str}

The format: a little-endian u64 header length, a JSON header (``{name: {dtype, shape, data_offsets}}``
plus ``__metadata__``: strings only), padded with spaces to 8 bytes, then each tensor's raw bytes in
order. The file loads with ``safetensors.torch.load_file``. Tensors are written one at a time as CPU
contiguous copies (a view or a non-contiguous tensor is copied; a GPU tensor is copied to the CPU), so
writing costs one tensor's memory at a time. The file is written atomically with mode 0600
(``files.atomic``). Reading validates the header with ``inspect.checkpoint_guard`` (sizes, offsets,
dtypes, overlaps) before reading any data, and never executes code.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ..inspect.checkpoint_guard import (ST_DTYPES, CheckpointError, open_regular,
                                        parse_safetensors_header, read_header_bytes)
from ..inspect.gc_paused import gc_paused
from ..inspect.safe import no_torch_function, safe_getattr
from .atomic import atomic_writer

__all__ = ["write_safetensors", "read_safetensors", "refusal", "tensor_nbytes", "CheckpointError"]

_CODES = {torch_name: code for code, (torch_name, _) in ST_DTYPES.items()}
_ITEMSIZES = {torch_name: itemsize for torch_name, itemsize in ST_DTYPES.values()}
_CHUNK = 64 * 1024 * 1024


def _dtype_name(t: Any) -> str:
    return str(safe_getattr(t, "dtype", "?")).replace("torch.", "")


def refusal(t: Any) -> str | None:
    """Usage: ``refusal(t)``; None when ``t`` can be written, else a few words saying why not."""
    names = {c.__name__ for c in type(t).__mro__}
    with no_torch_function():
        if safe_getattr(t, "is_meta", False):
            return "a meta tensor (no data)"
        if names & {"FakeTensor", "FunctionalTensor"}:
            return "a fake tensor (no data)"
        if "DTensor" in names:
            return "a DTensor (sharded across ranks; dump its .to_local())"
        if safe_getattr(t, "is_nested", False):
            return "a nested tensor"
        layout = str(safe_getattr(t, "layout", "?"))
        if layout != "torch.strided":
            return f"a {layout.replace('torch.', '')} tensor (dump its .to_dense())"
        if safe_getattr(t, "is_quantized", False):
            return "a quantized tensor (dump its .dequantize())"
        if _dtype_name(t) not in _CODES:
            return f"dtype {_dtype_name(t)} has no safetensors code"
    return None


def tensor_nbytes(t: Any) -> int:
    """Usage: ``tensor_nbytes(t)``; the bytes ``t`` takes in the file (numel × element size)."""
    with no_torch_function():
        return int(t.numel()) * int(t.element_size())


def _cpu_bytes(t: Any):
    """A 1-D uint8 CPU tensor holding ``t``'s elements in row-major order (a copy when needed)."""
    torch = sys.modules["torch"]
    with no_torch_function(), torch.no_grad():
        flat = torch.Tensor.detach(t).to("cpu").contiguous().reshape(-1)
        return flat.view(torch.uint8)


def write_safetensors(path: str, tensors: Sequence[tuple[str, Any]], metadata: dict[str, str] | None = None, *,
                      progress: Callable[[int, int], None] | None = None) -> int:
    """Usage: ``write_safetensors(p, [(name, t)], {"k": "v"})``; the file's size in bytes.

    Every tensor must pass ``refusal`` (checked first: nothing is written otherwise); names are unique.
    ``progress(bytes written, bytes in all)`` is called after each chunk of tensor data.
    """
    header: dict[str, Any] = {}
    offset = 0
    for name, t in tensors:
        why = refusal(t)
        if why:
            raise ValueError(f"{name}: {why}")
        if name in header or name == "__metadata__":
            raise ValueError(f"{name}: the name is used twice")
        size = tensor_nbytes(t)
        with no_torch_function():
            shape = [int(d) for d in t.shape]
        header[name] = {"dtype": _CODES[_dtype_name(t)], "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    raw = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    raw += b" " * (-(len(raw) + 8) % 8)
    with atomic_writer(path) as fh:
        fh.write(struct.pack("<Q", len(raw)))
        fh.write(raw)
        written = 0
        for _, t in tensors:
            data = _cpu_bytes(t)
            for start in range(0, int(data.numel()), _CHUNK):
                chunk = memoryview(data[start:start + _CHUNK].numpy())
                fh.write(chunk)
                written += chunk.nbytes
                if progress is not None:
                    progress(written, offset)
            del data
    return 8 + len(raw) + offset


def read_safetensors(path: str, *, mapped: bool = False, approve: Callable[[int, os.stat_result], None] | None = None
                     ) -> tuple[dict[str, Any], dict[str, str]]:
    """Usage: ``tensors, metadata = read_safetensors(p)``; CPU tensors in file order; ``CheckpointError``
    (one line) for a FIFO, a truncated file, a bad header or data that does not fit.

    ``mapped=True`` maps the file (copy-on-write: a tensor changed at the prompt never changes the file)
    instead of reading it: a tensor's pages are read from disk when used, so opening costs no memory. Only
    for a process that owns the file's fate (``python -m llmpdb open``): a mapped file cut short by another
    process kills the reader (SIGBUS), so a live job reads copies. ``approve(total_bytes, stat)`` runs after
    the header is checked and before any data is touched; it raises ``CheckpointError`` to refuse."""
    import torch

    name = os.path.basename(path) or path
    out: dict[str, Any] = {}
    try:
        with open_regular(path, name) as fh:
            st = os.fstat(fh.fileno())
            size, length, raw = read_header_bytes(fh, name)
            data_size = size - 8 - length
            found, spans, metadata = _header(raw, data_size, name)
            if approve is not None:
                approve(sum(end - begin for begin, end in spans.values()), st)
            view = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY) if mapped and data_size else None
            with gc_paused():  # a tensor a key: on 200,000 keys the collector's walks were half the time
                _rebuild(torch, fh, view, length, found, spans, out, name)
    except OSError as exc:
        raise CheckpointError(f"{name}: cannot read: {exc.strerror or exc}") from None
    except (RuntimeError, AttributeError, ValueError, TypeError) as exc:  # a dtype this torch lacks, a shape
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(f"{name}: cannot rebuild a tensor: {str(exc)[:120]}") from None
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise CheckpointError(f"{name}: __metadata__ must map strings to strings")
    return out, metadata


def _rebuild(torch, fh, view, length: int, found: dict, spans: dict, out: dict, name: str) -> None:
    """The tensors of a checked header into ``out``: views of the mapped file (``view``), else copies read
    from ``fh``; ``CheckpointError`` when the file ends inside a tensor's data."""
    for key, (dtype, shape) in found.items():
        begin, end = spans[key]
        torch_dtype = getattr(torch, dtype)
        if end == begin:
            out[key] = torch.empty(shape, dtype=torch_dtype)
            continue
        if view is not None:
            numel = (end - begin) // _ITEMSIZES[dtype]
            out[key] = torch.frombuffer(view, dtype=torch_dtype, count=numel,
                                        offset=8 + length + begin).reshape(shape)
            continue
        fh.seek(8 + length + begin)
        buf = bytearray(fh.read(end - begin))
        if len(buf) != end - begin:
            raise CheckpointError(f"{name}: {key!r}: the file ends inside its data")
        out[key] = torch.frombuffer(buf, dtype=torch.uint8).view(torch_dtype).reshape(shape)


def _header(raw: bytes, data_size: int, name: str):
    """The checked header: ``{key: (dtype, shape)}``, ``{key: (begin, end)}``, ``__metadata__``."""
    spans: dict[str, tuple[int, int]] = {}
    found, metadata = parse_safetensors_header(raw, data_size, name, spans_out=spans)
    return found, spans, metadata
