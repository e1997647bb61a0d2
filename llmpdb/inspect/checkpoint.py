"""Checkpoint metadata (names, shapes, dtypes) without reading the weights.

Usage::

    info = read_checkpoint("ckpt/")            # a folder, *.index.json, .safetensors, .bin/.pt/.pth
    info.tensors["model.norm.weight"]          # TensorMeta(shape=(64,), dtype="float32")
    read_safetensors_header("model.safetensors")

* ``.safetensors``: the header is read by the ``safetensors`` library where it imports (after llmpdb's
  file and length checks), by llmpdb's own parser otherwise (``safetensors_header``); no tensor byte is read.
* Sharded folders and ``*.index.json``: every shard's header (or pickle) is read; the index's ``weight_map``
  is cross-checked.
* ``.bin``/``.pt``/``.pth`` pickles: ``torch.load(weights_only=True, map_location="meta")``, which builds
  meta tensors and reads no storage bytes (legacy non-zip files too); a zip checkpoint whose tensors cannot be
  rebuilt on meta falls back to ``mmap=True, map_location="cpu"`` (mapped, never read). Weights nested under
  ``model_state_dict``/``state_dict``/``model``/``module`` are found. A pickle that needs globals beyond
  plain tensors is refused with one line that says how to allow a trusted file; nothing in it executes
  unless ``unsafe_trusted=True``.

Before anything is read, ``checkpoint_guard`` refuses what must not be read: a FIFO or device (never
opened), a zip bomb, a pickle that imports code (named, found by walking its opcodes), a shard outside the
checkpoint's folder, a safetensors header with impossible shapes, offsets or dtypes.

Every failure is a ``CheckpointError`` with a one-line message.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

from .checkpoint_guard import (
    MAX_HEADER,
    CheckpointError,
    contained_shard,
    load_json,
    open_regular,
    refuse_pickle_code,
    require_regular_file,
    shown_name,
)
from .kinds import is_module
from .safetensors_header import read_header

__all__ = [
    "CheckpointError",
    "CheckpointInfo",
    "TensorMeta",
    "NESTED_KEYS",
    "find_state_dict",
    "read_checkpoint",
    "read_safetensors_header",
    "read_pickle_checkpoint",
]

Progress = Optional[Callable[[int, int], None]]  # called with (shards read, shards in all)
NESTED_KEYS = ("model_state_dict", "state_dict", "model", "module")
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt")


@dataclass(frozen=True)
class TensorMeta:
    """Shape and dtype of one stored tensor; ``dtype`` is torch's name without ``torch.`` (``"bfloat16"``)."""

    shape: tuple[int, ...]
    dtype: str


@dataclass
class CheckpointInfo:
    """What a checkpoint holds, metadata only.

    ``kind`` is ``"safetensors"``, ``"pickle"``, ``"module"`` or ``"state dict"``; ``files`` the files read;
    ``nested_under`` the dict key the weights were found under (``"model_state_dict"``) or None;
    ``notes`` one-line remarks (ignored non-tensor entries, index inconsistencies).
    """

    label: str
    kind: str
    tensors: dict[str, TensorMeta]
    files: list[str] = field(default_factory=list)
    nested_under: str | None = None
    notes: list[str] = field(default_factory=list)


def _short(path: str) -> str:
    return os.path.basename(path.rstrip(os.sep)) or path


def read_safetensors_header(path: str) -> tuple[dict[str, TensorMeta], dict[str, Any]]:
    """Usage: ``tensors, metadata = read_safetensors_header("model.safetensors")``.

    Reads the header only (``safetensors_header.read_header``: the safetensors library where it imports,
    llmpdb's parser otherwise), after the file, its header length and size are checked. Raises
    ``CheckpointError`` on a truncated or malformed file.
    """
    header = read_header(path)
    return {key: TensorMeta(shape, dtype) for key, (dtype, shape) in header.tensors.items()}, header.metadata


def _unsupported_global(message: str) -> str | None:
    match = re.search(r"Unsupported global: GLOBAL ([\w.]+)", message)
    if match:
        return match.group(1)
    match = re.search(r"(?:Unsupported class|global) ([\w.]+)", message)
    return match.group(1) if match else None


def _tensor_count(obj: Any, depth: int = 0) -> int:
    """Tensors directly in ``obj``, or in its nested weights dict when it has none of its own."""
    import torch

    if not issubclass(type(obj), dict) or depth > 4:
        return 0
    direct = sum(1 for v in obj.values() if issubclass(type(v), torch.Tensor))
    if direct:
        return direct
    return max((_tensor_count(obj.get(k), depth + 1) for k in NESTED_KEYS), default=0)


def find_state_dict(obj: Any, label: str) -> tuple[dict[str, Any], str | None, list[str]]:
    """Usage: ``tensors, nested_under, notes = find_state_dict(loaded, "ckpt.pt")``.

    The weights of a loaded checkpoint: its top level, or the dict nested under ``NESTED_KEYS`` that holds
    more tensors (``{"model_state_dict": ..., "optimizer_state_dict": ..., "step": 3}``).
    """
    import torch

    path: list[str] = []
    for _ in range(4):
        if not issubclass(type(obj), dict):  # by type, here and below: isinstance reads __class__
            break
        tensors = {k: v for k, v in obj.items() if type(k) is str and issubclass(type(v), torch.Tensor)}
        counts = {k: _tensor_count(obj.get(k)) for k in NESTED_KEYS}
        nested = max((k for k in NESTED_KEYS if counts[k]), key=lambda k: counts[k], default=None)
        if nested is not None and counts[nested] > len(tensors):
            path.append(nested)
            obj = obj[nested]
            continue
        if tensors:
            others = [str(k) for k in obj if k not in tensors]
            notes = [f"ignored {len(others)} non-tensor entries ({', '.join(others[:4])})"] if others else []
            return tensors, ".".join(path) or None, notes
        break
    if issubclass(type(obj), dict):
        keys = ", ".join(str(k) for k in list(obj)[:6])
        raise CheckpointError(f"{label}: no tensors found (top-level keys: {keys})")
    raise CheckpointError(f"{label}: holds a {type(obj).__name__}, not a dict of tensors")


def read_pickle_checkpoint(path: str, *, unsafe_trusted: bool = False) -> CheckpointInfo:
    """Usage: ``read_pickle_checkpoint("ckpt.pt")``; meta-device load, refuses arbitrary globals.

    ``unsafe_trusted=True`` loads with ``weights_only=False`` (runs the pickle's code): only for files you trust.
    """
    import pickle

    import torch

    name = _short(path)
    refuse_pickle_code(path, unsafe_trusted=unsafe_trusted)

    def load(**kwargs):
        return torch.load(path, weights_only=not unsafe_trusted, **kwargs)

    try:
        try:
            obj = load(map_location="meta")
        except (pickle.UnpicklingError, OSError, EOFError):
            raise
        except RuntimeError:
            # tensors that cannot be rebuilt on meta: map the file instead (zip format only), read nothing
            obj = load(map_location="cpu", mmap=True)
    except pickle.UnpicklingError as exc:
        glob = _unsupported_global(str(exc))
        if glob:
            raise CheckpointError(
                f"{name}: refused: this pickle would run code ({glob}); `--unsafe-trusted` loads it") from None
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"{name}: not a readable torch checkpoint ({first[:120]})") from None
    except Exception as exc:  # a corrupt file makes the unpickler fail in many ways: one line for each
        first = (str(exc).strip().splitlines() or [""])[0]
        raise CheckpointError(
            f"{name}: cannot read checkpoint (not a torch.save file?): {type(exc).__name__}: {first[:120]}"
        ) from None
    if is_module(obj):
        obj = {k: v for k, v in obj.state_dict().items()}
    tensors, nested, notes = find_state_dict(obj, name)
    meta = {k: TensorMeta(tuple(v.shape), str(v.dtype).removeprefix("torch.")) for k, v in tensors.items()}
    return CheckpointInfo(path, "pickle", meta, [path], nested, notes)


def _read_one(path: str, unsafe_trusted: bool) -> CheckpointInfo:
    if path.endswith(".safetensors"):
        header = read_header(path)
        tensors = {key: TensorMeta(shape, dtype) for key, (dtype, shape) in header.tensors.items()}
        notes = [f"{_short(path)}: {note}" for note in header.notes]
        return CheckpointInfo(path, "safetensors", tensors, [path], notes=notes)
    return read_pickle_checkpoint(path, unsafe_trusted=unsafe_trusted)


def _read_all(paths: list[str], unsafe_trusted: bool, progress: Progress) -> list[CheckpointInfo]:
    parts = []
    for done, path in enumerate(paths, 1):
        parts.append(_read_one(path, unsafe_trusted))
        if progress is not None:
            progress(done, len(paths))
    return parts


def _read_index(index_path: str, unsafe_trusted: bool, progress: Progress = None) -> CheckpointInfo:
    name = _short(index_path)
    try:
        with open_regular(index_path, name) as fh:
            raw = fh.read(MAX_HEADER + 1)
        if len(raw) > MAX_HEADER:
            raise CheckpointError(f"{name}: refused: an index over {MAX_HEADER // 2**20} MB")
        index = load_json(raw, name, "index")
        weight_map = index["weight_map"]
        if not isinstance(weight_map, dict):
            raise TypeError("weight_map is not an object")
    except CheckpointError:
        raise
    except OSError as exc:
        raise CheckpointError(f"{name}: cannot read: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise CheckpointError(f"{name}: not a valid index ({type(exc).__name__}: {str(exc)[:120]})") from None
    folder = os.path.dirname(index_path)
    shards = list(dict.fromkeys(str(v) for v in weight_map.values()))
    paths = [contained_shard(folder, s, name) for s in shards]
    absent = [s for s, p in zip(shards, paths) if not os.path.lexists(p)]
    if absent:
        shown = ", ".join(shown_name(s, 60).strip("'") for s in absent[:3])
        raise CheckpointError(f"{name}: {len(absent)} shard(s) listed but absent: {shown}")
    for path in paths:
        require_regular_file(path)
    info = _merge(_read_all(paths, unsafe_trusted, progress), index_path)
    misplaced = [k for k, s in weight_map.items() if k not in info.tensors]
    if misplaced:
        info.notes.append(f"index lists {len(misplaced)} key(s) no shard holds (e.g. {misplaced[0]})")
    unlisted = [k for k in info.tensors if k not in weight_map]
    if unlisted:
        info.notes.append(f"shards hold {len(unlisted)} key(s) the index does not list (e.g. {unlisted[0]})")
    return info


def _merge(parts: list[CheckpointInfo], label: str) -> CheckpointInfo:
    tensors: dict[str, TensorMeta] = {}
    notes: list[str] = []
    for part in parts:
        for key, meta in part.tensors.items():
            if key in tensors:
                notes.append(f"{key} appears in more than one file; the last one counts")
            tensors[key] = meta
        notes.extend(part.notes)
    kinds = {p.kind for p in parts}
    nested = next((p.nested_under for p in parts if p.nested_under), None)
    return CheckpointInfo(label, "/".join(sorted(kinds)), tensors, [f for p in parts for f in p.files], nested, notes)


def _read_folder(folder: str, unsafe_trusted: bool, progress: Progress = None) -> CheckpointInfo:
    entries = sorted(os.listdir(folder))
    for suffix in (".safetensors.index.json", ".index.json"):
        indexes = [e for e in entries if e.endswith(suffix)]
        if indexes:
            info = _read_index(os.path.join(folder, indexes[0]), unsafe_trusted, progress)
            if len(indexes) > 1:
                info.notes.append(f"{len(indexes)} index files; read {indexes[0]}")
            info.label = folder
            return info
    for suffixes in ((".safetensors",), PICKLE_SUFFIXES):
        files = [e for e in entries if e.endswith(suffixes) and not os.path.isdir(os.path.join(folder, e))]
        if files:
            paths = [contained_shard(folder, f, _short(folder)) for f in files]
            return _merge(_read_all(paths, unsafe_trusted, progress), folder)
    raise CheckpointError(f"{_short(folder)}: no *.safetensors, *.bin, *.pt or *.index.json in this folder")


def read_checkpoint(path: str | os.PathLike, *, unsafe_trusted: bool = False, progress: Progress = None
                    ) -> CheckpointInfo:
    """Usage: ``read_checkpoint("out/checkpoint-500")``; dispatch on folder, index, safetensors, pickle.

    ``progress(done, total)`` is called after each shard of a folder or index is read."""
    path = os.path.expanduser(os.fspath(path))
    if os.path.isdir(path):
        return _read_folder(path, unsafe_trusted, progress)
    if not os.path.exists(path):
        raise CheckpointError(f"{path}: no such file or folder")
    require_regular_file(path)
    if path.endswith(".json"):
        info = _read_index(path, unsafe_trusted, progress)
        info.label = path
        return info
    return _read_one(path, unsafe_trusted)
