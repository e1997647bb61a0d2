"""Refuse hostile checkpoints before anything reads them: pipes, zip bombs, code in pickles, bad headers.

Usage::

    require_regular_file("ckpt.pt")                     # a FIFO or device is refused, never opened
    shard = contained_shard("ckpt/", "../x.bin", label)  # a shard outside the checkpoint's folder is refused
    refuse_pickle_code("ckpt.pt", unsafe_trusted=False)  # zip-bomb check, then the pickle's imports
    tensors, metadata = parse_safetensors_header(raw, data_size, "m.safetensors")

Every refusal is a ``CheckpointError`` whose message is one line. Nothing here unpickles: the pickle's
opcodes are walked with ``pickletools`` to name the globals it imports, and a ``torch.save`` zip file is
judged by torch's public ``torch.serialization.get_unsafe_globals_in_checkpoint`` (its ``weights_only``
allow list plus ``add_safe_globals``); a legacy file, or a pickle that scan cannot read, is judged by the
allow list itself (torch keeps it private: ``_weights_only_unpickler``). Reading is bounded: a zip
entry is inflated only up to its declared size, ``data.pkl`` only up to ``MAX_PICKLE_BYTES``, a
safetensors header only up to ``MAX_HEADER``.
"""

from __future__ import annotations

import json
import os
import re
import stat
import struct
import zipfile
from io import BytesIO
from typing import Any, BinaryIO

from ..units import human_bytes
from .gc_paused import gc_paused
from .pickle_globals import pickle_imports, public_unsafe, shown_global, unsafe_globals

__all__ = [
    "CheckpointError", "MAX_HEADER", "MAX_PICKLE_BYTES", "MAX_INFLATE_RATIO", "ST_DTYPES",
    "require_regular_file", "open_regular", "read_header_bytes", "contained_shard", "shown_name", "refuse_pickle_code",
    "pickle_imports", "load_json", "parse_safetensors_header",
]

MAX_HEADER = 100 * 1024 * 1024  # the safetensors library refuses larger headers too
MAX_PICKLE_BYTES = 64 * 1024 * 1024  # data.pkl of a state dict is KBs to a few MBs; its tensors are separate
MAX_INFLATE_RATIO = 100  # torch.save stores entries uncompressed; a deflated entry that grows more is a bomb
_LEGACY_PICKLES = 5  # magic number, protocol, sys info, the object, the storage keys
_MAX_DIGITS = 19  # any dimension or offset fits in a signed 64-bit integer
_LONG_DIGITS = re.compile(rb"[0-9]{%d}" % (_MAX_DIGITS + 1))  # a number that may be too long
_ZIP_MAGIC = b"PK\x03\x04"  # how a zip archive, and so a torch.save file since torch 1.6, starts

ST_DTYPES = {
    "BOOL": ("bool", 1), "U8": ("uint8", 1), "I8": ("int8", 1), "U16": ("uint16", 2), "I16": ("int16", 2),
    "U32": ("uint32", 4), "I32": ("int32", 4), "U64": ("uint64", 8), "I64": ("int64", 8),
    "F16": ("float16", 2), "BF16": ("bfloat16", 2), "F32": ("float32", 4), "F64": ("float64", 8),
    "C64": ("complex64", 8), "F8_E4M3": ("float8_e4m3fn", 1), "F8_E4M3FNUZ": ("float8_e4m3fnuz", 1),
    "F8_E5M2": ("float8_e5m2", 1), "F8_E5M2FNUZ": ("float8_e5m2fnuz", 1), "F8_E8M0": ("float8_e8m0fnu", 1),
}
_FILE_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


class CheckpointError(ValueError):
    """A checkpoint that cannot be read safely: the message is one line for the user."""


def _short(path: str) -> str:
    return os.path.basename(path.rstrip(os.sep)) or path


# ---- files: regular only, inside the checkpoint's folder -------------------------------------------------
def require_regular_file(path: str, label: str | None = None) -> os.stat_result:
    """Usage: ``require_regular_file(p)``; ``os.stat`` (never ``open``): a FIFO, device or socket is refused."""
    name = label or _short(path)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise CheckpointError(f"{name}: cannot read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = next((what for test, what in _FILE_KINDS if test(st.st_mode)), "not a regular file")
        why = "" if stat.S_ISDIR(st.st_mode) else " (reading it could block forever)"
        raise CheckpointError(f"{name}: refused: {kind}, not a regular file{why}")
    return st


def open_regular(path: str, label: str | None = None) -> BinaryIO:
    """Usage: ``with open_regular(p) as fh: ...``; checked by ``stat`` first, re-checked on the open file."""
    require_regular_file(path, label)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise CheckpointError(f"{label or _short(path)}: cannot read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped for a pipe between the stat and the open
        os.close(fd)
        raise CheckpointError(f"{label or _short(path)}: refused: not a regular file")
    return os.fdopen(fd, "rb")


def read_header_bytes(fh: BinaryIO, name: str) -> tuple[int, int, bytes]:
    """Usage: ``size, length, raw = read_header_bytes(fh, name)`` on a file from ``open_regular``: a
    safetensors file's size, its header length and the header's bytes, the length checked against the
    file's size and ``MAX_HEADER`` before anything is read (``CheckpointError``, one line, otherwise)."""
    size = os.fstat(fh.fileno()).st_size
    head = fh.read(8)
    if len(head) < 8:
        raise CheckpointError(f"{name}: truncated safetensors file ({size} bytes; it must start with an "
                              "8-byte header length)")
    (length,) = struct.unpack("<Q", head)
    if length > size - 8:
        kind = _other_format(head)
        if kind:
            raise CheckpointError(f"{name}: not a safetensors file: its first bytes are those of {kind}")
        raise CheckpointError(f"{name}: header length {length} bytes is larger than the file ({size} bytes):"
                              " truncated or not a safetensors file")
    if length > MAX_HEADER:
        raise CheckpointError(f"{name}: header length {length} bytes exceeds the 100 MB safetensors limit")
    raw = fh.read(length)
    if len(raw) != length:
        raise CheckpointError(f"{name}: the file ends inside its header")
    return size, length, raw


def _other_format(head: bytes) -> str:
    """What a file's first bytes say it is when it is not safetensors ("" when they say nothing)."""
    if head.startswith(_ZIP_MAGIC):
        return "a zip archive (a torch.save checkpoint)"
    if head[:1] == b"\x80" and 2 <= head[1] <= 5:
        return "a pickle (a legacy torch.save checkpoint)"
    if head.startswith(b"\x93NUMPY"):
        return "a NumPy .npy array"
    if head.startswith(b"GGUF"):
        return "a GGUF file"
    if head.startswith(b"\x89HDF"):
        return "an HDF5 file"
    return ""


def _inside(path: str, folder: str) -> bool:
    try:
        return os.path.commonpath([path, folder]) == folder
    except ValueError:  # different drives
        return False


def _hub_blobs(root: str) -> str | None:
    """``…/models--org--name/blobs`` when ``root`` is a Hugging Face cache snapshot (its files link there)."""
    snapshots = os.path.dirname(root)
    repo = os.path.dirname(snapshots)
    if os.path.basename(snapshots) == "snapshots" and os.path.basename(repo).startswith(
            ("models--", "datasets--")):
        return os.path.join(repo, "blobs")
    return None


def shown_name(name: str, limit: int = 80) -> str:
    """Usage: ``shown_name(shard)``; ``repr`` of a file name, cut in the middle when longer than ``limit``."""
    text = repr(name)
    return text if len(text) <= limit else text[:limit // 2 - 1] + "…" + text[-(limit // 2 - 1):]


def contained_shard(folder: str, shard: str, label: str) -> str:
    """Usage: ``path = contained_shard(folder, "model-00001.safetensors", "index.json")``.

    The shard's path when it lies inside ``folder``: an absolute name, a ``..`` that climbs out, or a link
    whose target is outside is refused (a link into a Hugging Face cache's ``blobs/`` is the one exception:
    that is how the cache stores every file).
    """
    shown = shown_name(shard)
    if "\x00" in shard:
        raise CheckpointError(f"{label}: refused: shard {shown} holds a NUL byte, which no file name can")
    if os.path.isabs(shard) or os.path.splitdrive(shard)[0]:
        raise CheckpointError(f"{label}: refused: shard {shown} is an absolute path, outside the checkpoint's "
                              "folder")
    root = os.path.realpath(folder)
    lexical = os.path.normpath(os.path.join(root, shard))
    if not _inside(lexical, root):
        raise CheckpointError(f"{label}: refused: shard {shown} is outside the checkpoint's folder")
    target = os.path.realpath(lexical)
    blobs = _hub_blobs(root)
    if not _inside(target, root) and not (blobs and _inside(target, blobs)):
        raise CheckpointError(f"{label}: refused: shard {shown} links to {target}, outside the checkpoint's "
                              "folder (name that file itself to read it)")
    return os.path.join(folder, shard)


# ---- pickles: zip-bomb check, then the imports the pickle makes, never unpickled --------------------------
def _zip_pickle(fh: BinaryIO, name: str) -> bytes | None:
    """``data.pkl`` of a torch zip checkpoint, after every entry's declared size was checked; None if absent."""
    try:
        archive = zipfile.ZipFile(fh)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise CheckpointError(f"{name}: not a readable torch checkpoint (corrupt zip: {exc})") from None
    entries = archive.infolist()
    for info in entries:
        if info.compress_type != zipfile.ZIP_STORED and info.file_size > 2**20 and \
                info.file_size > MAX_INFLATE_RATIO * max(info.compress_size, 1):
            raise CheckpointError(
                f"{name}: refused: {info.filename} inflates to {human_bytes(info.file_size)} from "
                f"{human_bytes(info.compress_size)} ({info.file_size // max(info.compress_size, 1)}×): a zip bomb; "
                "torch.save never compresses")
    prefix = entries[0].filename.split("/", 1)[0] if entries else ""
    for info in entries:  # records torch reads whole (data.pkl, version, byteorder...): tensors live in data/
        if not info.filename.startswith(f"{prefix}/data/") and info.file_size > MAX_PICKLE_BYTES:
            raise CheckpointError(f"{name}: refused: {info.filename} is {human_bytes(info.file_size)}; a state "
                                  f"dict's pickle holds no tensor data (limit {human_bytes(MAX_PICKLE_BYTES)})")
    info = next((i for i in entries if i.filename == f"{prefix}/data.pkl"), None)
    if info is None:
        return None
    try:
        with archive.open(info) as member:
            return member.read(MAX_PICKLE_BYTES + 1)  # never more than declared: zipfile stops there
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise CheckpointError(f"{name}: not a readable torch checkpoint (corrupt zip: {exc})") from None


class _TooLong(Exception):
    pass


class _Bounded:
    """A read-only view of a file that refuses to hand out more than ``limit`` bytes in all."""

    def __init__(self, fh: BinaryIO, limit: int):
        self._fh, self._left = fh, limit

    def _take(self, data: bytes) -> bytes:
        self._left -= len(data)
        if self._left < 0:
            raise _TooLong
        return data

    def read(self, n: int = -1) -> bytes:
        return self._take(self._fh.read(self._left + 1 if n is None or n < 0 or n > self._left else n))

    def readline(self) -> bytes:
        return self._take(self._fh.readline(self._left + 1))

    def tell(self) -> int:
        return self._fh.tell()


def refuse_pickle_code(path: str, *, unsafe_trusted: bool = False) -> None:
    """Usage: ``refuse_pickle_code("ckpt.pt")``; raises ``CheckpointError`` for a file that must not be loaded.

    Always: a non-regular or empty file (``/proc`` files say 0 bytes), a zip entry that inflates more than
    ``MAX_INFLATE_RATIO``×, a ``data.pkl`` over ``MAX_PICKLE_BYTES``. Unless ``unsafe_trusted``: a pickle importing a global outside torch's
    ``weights_only`` allow list: ``refused: this pickle would run code (os.system); `--unsafe-trusted`
    loads it``.
    """
    name = _short(path)
    try:
        _scan(path, name, unsafe_trusted)
    except OSError as exc:
        raise CheckpointError(f"{name}: cannot read: {exc.strerror or exc}") from None


def _scan(path: str, name: str, unsafe_trusted: bool) -> None:
    with open_regular(path, name) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:  # also what /proc and /sys files report: their reads can block or never end
            raise CheckpointError(f"{name}: refused: an empty file (0 bytes), not a torch.save file")
        if fh.read(4) == _ZIP_MAGIC:
            fh.seek(0)
            data = _zip_pickle(fh, name)
            stream, count, end = BytesIO(data or b""), 1 if data else 0, len(data or b"")
            public = public_unsafe(fh) if data and not unsafe_trusted else None
        else:
            public = None
            fh.seek(0)
            stream, count, end = _Bounded(fh, MAX_PICKLE_BYTES), _LEGACY_PICKLES, size
        if unsafe_trusted:
            return
        imports: list[str] = []
        try:
            for _ in range(count):
                if stream.tell() >= end:
                    break
                imports += pickle_imports(stream)
        except _TooLong:
            raise CheckpointError(f"{name}: refused: its pickle runs past {human_bytes(MAX_PICKLE_BYTES)}; "
                                  "a state dict's pickle holds no tensor data") from None
        except (ValueError, EOFError) as exc:
            if not imports:
                raise CheckpointError(f"{name}: not a readable torch checkpoint (not a pickle: {exc})") from None
    unsafe = unsafe_globals(imports, public)
    if unsafe:
        shown = ", ".join(shown_global(g) for g in unsafe[:3]) + (f" and {len(unsafe) - 3} more" if len(unsafe) > 3
                                                             else "")
        raise CheckpointError(f"{name}: refused: this pickle would run code ({shown}); `--unsafe-trusted` loads it")


# ---- safetensors: every field of the header checked ------------------------------------------------------
class _HeaderProblem(Exception):
    pass


class _Number(float):
    """A JSON float that remembers how it was written (``1e400``, not ``inf``), made only where its repr
    would differ: a header of 26 million ``0.0`` holds plain floats (24 bytes each, not ~370)."""

    __slots__ = ("text",)

    def __repr__(self) -> str:
        return self.text


def _parse_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > _MAX_DIGITS:
        raise _HeaderProblem(f"a {digits}-digit number (a checkpoint's numbers have at most {_MAX_DIGITS})")
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if repr(value) == text:
        return value
    number = _Number(text)
    number.text = text if len(text) <= 24 else text[:20] + "…"
    return number


def _parse_constant(text: str) -> float:
    raise _HeaderProblem(f"{text}, which is not JSON")


class _DuplicateKey(Exception):
    pass


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:  # json.loads would keep the last silently; readers may have kept the first
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _show(value: Any) -> str:
    text = repr(value) if not isinstance(value, list) else "[" + ", ".join(map(repr, value[:8])) + (
        ", …]" if len(value) > 8 else "]")
    return text if len(text) <= 80 else text[:77] + "…"


def _is_int(value: Any) -> bool:
    return type(value) is int


def _entry(key: str, entry: Any, data_size: int) -> tuple[str, tuple[int, ...], int, int]:
    if not isinstance(entry, dict) or not {"dtype", "shape", "data_offsets"} <= set(entry):
        raise _HeaderProblem(f"{key!r}: needs dtype, shape and data_offsets, got {_show(entry)}")
    code, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not isinstance(code, str) or code not in ST_DTYPES:
        raise _HeaderProblem(f"{key!r}: unknown dtype {_show(code)} (known: {', '.join(ST_DTYPES)})")
    if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
        raise _HeaderProblem(f"{key!r}: shape {_show(shape)} is not a list of non-negative integers")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_int(o) and o >= 0 for o in offsets)):
        raise _HeaderProblem(f"{key!r}: data_offsets {_show(offsets)} is not two non-negative integers")
    dtype, itemsize = ST_DTYPES[code]
    begin, end = offsets
    if end > data_size:
        raise _HeaderProblem(f"truncated: {key!r} ends at byte {end} of the data but the file holds {data_size}")
    numel = 1
    for d in shape:
        numel *= d
    if begin > end or end - begin != numel * itemsize:
        raise _HeaderProblem(f"{key!r} spans bytes {begin}..{end} but shape {tuple(shape)} of {dtype} needs "
                             f"{numel * itemsize}")
    return dtype, tuple(shape), begin, end


def load_json(raw: bytes, name: str, what: str) -> Any:
    """Usage: ``load_json(raw, "index.json", "index")``; JSON with numbers of at most 19 digits, no NaN, no
    duplicate key in any object, a bounded depth; every failure one ``CheckpointError`` line (``{name}: refused: {what} holds ...``)."""
    try:
        # no run of 20 digits anywhere: every number fits, so ints skip the Python check (1.2M calls in a
        # 200,000-tensor header); keys are strings and may hold digits, which only sends them the slow way
        parse_int = _parse_int if _LONG_DIGITS.search(raw) else None
        with gc_paused():
            return json.loads(raw.decode("utf-8"), parse_int=parse_int, parse_float=_parse_float,
                              parse_constant=_parse_constant, object_pairs_hook=_unique_pairs)
    except _DuplicateKey as exc:
        key = str(exc.args[0])
        key = key if len(key) <= 60 else key[:40] + "…" + key[-19:]
        raise CheckpointError(f"{name}: refused: duplicate key {key!r} in the {what}") from None
    except _HeaderProblem as exc:
        raise CheckpointError(f"{name}: refused: {what} holds {exc}") from None
    except RecursionError:
        raise CheckpointError(f"{name}: refused: {what} is nested too deeply") from None
    except MemoryError:  # millions of small values under the size limit, on a machine with little memory
        raise CheckpointError(f"{name}: refused: {what} ({human_bytes(len(raw))}) needs more memory than "
                              "this process has") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{name}: {what} is not valid JSON ({exc})") from None
    except ValueError as exc:  # anything else the decoder refuses
        raise CheckpointError(f"{name}: {what} is not valid JSON ({str(exc)[:80]})") from None


def parse_safetensors_header(raw: bytes, data_size: int, name: str, spans_out: dict | None = None,
                             ) -> tuple[dict[str, tuple[str, tuple[int, ...]]], dict[str, Any]]:
    """Usage: ``tensors, metadata = parse_safetensors_header(raw, size - 8 - n, "m.safetensors")``.

    ``tensors[key] = (torch dtype name, shape)``; ``spans_out``, when given, gets ``key -> (begin, end)``
    (the checked data offsets) for every tensor, so a reader parses the header once. Refused with one
    line: bad JSON, nesting too deep, a number of more than 19 digits, an unknown dtype, a negative or
    non-integer dimension or offset, a span that does not fit dtype × shape or the file, two tensors
    sharing bytes.
    """
    header = load_json(raw, name, "safetensors header")
    if not isinstance(header, dict):
        raise CheckpointError(f"{name}: safetensors header is a JSON {type(header).__name__}, not an object")
    metadata = header.pop("__metadata__", None) or {}
    tensors: dict[str, tuple[str, tuple[int, ...]]] = {}
    spans: list[tuple[int, int, str]] = []
    try:
        for key, entry in header.items():
            dtype, shape, begin, end = _entry(key, entry, data_size)
            tensors[key] = (dtype, shape)
            if spans_out is not None:
                spans_out[key] = (begin, end)
            if end > begin:
                spans.append((begin, end, key))
    except _HeaderProblem as exc:
        raise CheckpointError(f"{name}: {exc}") from None
    spans.sort()
    for (_, end_a, key_a), (begin_b, _, key_b) in zip(spans, spans[1:]):
        if begin_b < end_a:
            raise CheckpointError(f"{name}: refused: {key_a!r} and {key_b!r} share bytes {begin_b}..{end_a}")
    return tensors, metadata if isinstance(metadata, dict) else {}

