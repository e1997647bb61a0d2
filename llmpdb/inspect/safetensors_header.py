"""A safetensors file's names, shapes, dtypes and metadata, read by the ``safetensors`` library where it imports.

Usage::

    header = read_header("model.safetensors")
    header.tensors["lm_head.weight"]   # ("bfloat16", (32000, 4096)): torch's dtype name and shape
    header.metadata                    # {"format": "pt"}
    header.reader                      # "safetensors 0.8.0", or "llmpdb" (the library is absent or refused)
    header.refused                     # why the library did not read it ("" when it did)

llmpdb's guards run first, on a file descriptor it holds: a FIFO, device or socket is refused before any
open that could block; the 8-byte header length must fit the file and ``MAX_HEADER``; the header is read
with ``read`` (bounded). The library then reads a private copy of those bytes: a temp file (0600) holding
the same 8 + n header bytes, extended to the file's size without writing the data (a sparse file). So the
library parses exactly the bytes that were checked, and its memory map is of a file nobody else can cut
short (a checkpoint rewritten in place while it is read would kill a reader that maps it: SIGBUS). The
library checks every offset, dtype and shape itself; it is 2–3× faster than llmpdb's parser on 100k
tensors (``bench/safetensors_header_bench.py``) and knows every dtype it can load (``F4`` packs two values
a byte: torch sees ``float4_e2m1fn_x2`` with the last dimension halved). Where the library does not
import, cannot get its copy (no temp folder) or refuses a file, llmpdb's own parser
(``checkpoint_guard.parse_safetensors_header``) reads it, and ``notes`` says why; a file both refuse is
one ``CheckpointError`` line: llmpdb's reason, then ``(safetensors 0.8.0 refuses it too)``. A header that
may name one tensor twice (the library keeps the last silently) is left to llmpdb's parser, which
refuses it.
"""

from __future__ import annotations

import os
import struct
import tempfile
from dataclasses import dataclass, field
from typing import Any

from .checkpoint_guard import ST_DTYPES, CheckpointError, open_regular, parse_safetensors_header, read_header_bytes

__all__ = ["SafetensorsHeader", "read_header", "library_reader", "LIBRARY_DTYPES"]

# safetensors codes the library reads that llmpdb's own parser does not know: torch's name, and by how
# much the last dimension shrinks in torch (two F4 values share a byte). None: torch has no such dtype.
LIBRARY_DTYPES: dict[str, tuple[str, int]] = {"F4": ("float4_e2m1fn_x2", 2)}


@dataclass
class SafetensorsHeader:
    """What a safetensors header says: ``tensors[name] = (dtype, shape)`` in file order."""

    tensors: dict[str, tuple[str, tuple[int, ...]]]
    metadata: dict[str, Any]
    reader: str
    refused: str = ""
    notes: list[str] = field(default_factory=list)


def library_reader() -> tuple[Any, str] | None:
    """Usage: ``found = library_reader()``; ``(safe_open, "safetensors 0.8.0")``, or None when it does not import."""
    try:
        import safetensors
        from safetensors import safe_open
    except Exception:  # absent, or a broken build: llmpdb's parser reads instead
        return None
    return safe_open, f"safetensors {getattr(safetensors, '__version__', '?')}"


class _Ambiguous(Exception):
    pass


def _torch_view(code: str, shape: list[int]) -> tuple[str, tuple[int, ...]]:
    if code in ST_DTYPES:
        return ST_DTYPES[code][0], tuple(shape)
    if code in LIBRARY_DTYPES:
        name, pack = LIBRARY_DTYPES[code]
        return name, tuple(shape[:-1]) + ((shape[-1] // pack,) if shape else ())
    return code, tuple(shape)  # F6_E2M3, F6_E3M2, a code newer than this table: shown as written


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    text = text.removeprefix("Error while deserializing header: ")
    return text if len(text) <= 160 else text[:157] + "…"


class _NoCopy(Exception):
    pass


def _with_library(opener: Any, header: bytes, size: int, raw: bytes) -> tuple[dict, dict]:
    copy = None
    try:
        fd, copy = tempfile.mkstemp(prefix="llmpdb-header-", suffix=".safetensors")  # 0600, O_EXCL: no link
        with os.fdopen(fd, "wb") as out:
            out.write(header)
            out.truncate(size)  # the data region: a hole, no byte written
    except OSError as exc:  # no temp folder, a full disk
        if copy:
            os.unlink(copy)
        raise _NoCopy(exc.strerror or str(exc)) from None
    try:
        return _library_read(opener, copy, raw)
    finally:
        os.unlink(copy)


def _library_read(opener: Any, source: str, raw: bytes) -> tuple[dict, dict]:
    with opener(source, framework="pt") as handle:
        names = handle.keys()
        if raw.count(b'"data_offsets"') != len(names):  # a name written twice, or the words in metadata
            raise _Ambiguous
        tensors = {}
        for key in names:
            part = handle.get_slice(key)
            tensors[key] = _torch_view(str(part.get_dtype()), [int(d) for d in part.get_shape()])
        metadata = handle.metadata() or {}
    return tensors, dict(metadata)


def read_header(path: str, *, use_library: bool = True) -> SafetensorsHeader:
    """Usage: ``read_header(p)``; the header, or ``CheckpointError`` (one line) for a file nothing should read.

    ``use_library=False`` reads with llmpdb's parser only (the bench compares the two)."""
    name = os.path.basename(path.rstrip(os.sep)) or path
    try:
        with open_regular(path, name) as fh:
            size, length, raw = read_header_bytes(fh, name)
            found = library_reader() if use_library else None
            refused = why = ""
            if found is not None:
                opener, reader = found
                try:
                    tensors, metadata = _with_library(opener, struct.pack("<Q", length) + raw, size, raw)
                    return SafetensorsHeader(tensors, metadata, reader)
                except _NoCopy as exc:
                    refused, why = reader, f"not used: no temp file for its copy of the header ({exc})"
                except _Ambiguous:
                    refused, why = reader, "left it to llmpdb: a name may be written twice"
                except (KeyboardInterrupt, SystemExit):
                    raise
                except BaseException as exc:  # SafetensorError, OSError, a Rust panic (PanicException)
                    refused, why = reader, f"refused it: {_one_line(exc)}"
    except OSError as exc:
        raise CheckpointError(f"{name}: cannot read: {exc.strerror or exc}") from None
    try:
        tensors, metadata = parse_safetensors_header(raw, size - 8 - length, name)
    except CheckpointError as exc:
        if refused and why.startswith("refused"):  # llmpdb's reason is the more precise one
            raise CheckpointError(f"{exc} ({refused} refuses it too)") from None
        raise
    notes = [f"read by llmpdb's parser: {refused} {why}"] if refused else []
    return SafetensorsHeader(tensors, metadata, "llmpdb", f"{refused} {why}".strip(), notes)
