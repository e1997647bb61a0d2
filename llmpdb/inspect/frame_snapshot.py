"""What a snapshot file keeps besides the tensors: the location, the module stack, the KV cache metadata.

Usage::

    doc = snapshot_document(frame, stack, index, locals_, root=user_root(), header="path: eval, ...")
    doc = location_record(frame)     # {"file", "line", "function", "rank", "time", "pid"}

Everything is plain JSON data (``saved_records``), read from metadata only: the module stack is
``modules.model_stack``, the cache report ``kv.inspect_cache`` (found like ``kv`` finds it: the frame's
locals, then the enclosing model frames). A part that cannot be read becomes a note, never an error.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from .config import locate_config
from .dims import DimNamer
from .kv import find_cache, find_enclosing_cache, inspect_cache
from .modules import model_stack
from .saved_records import records_to_json

__all__ = ["FORMAT", "snapshot_document", "location_record", "process_rank"]

FORMAT = "llmpdb-snapshot-1"


def process_rank() -> int | None:
    """Usage: ``process_rank()``; the distributed rank when torch.distributed runs, else ``$RANK``, else None."""
    dist = getattr(sys.modules.get("torch"), "distributed", None)
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:  # a half-initialised process group: fall back to the environment
        pass
    text = os.environ.get("RANK", "")
    return int(text) if text.isdigit() else None


def location_record(frame: Any) -> dict[str, Any]:
    """Usage: ``location_record(frame)``; where and when: file, line, function, rank, UTC time, pid."""
    code = frame.f_code if frame is not None else None
    return {
        "file": code.co_filename if code else "?",
        "line": frame.f_lineno if frame is not None else 0,
        "function": getattr(code, "co_qualname", code.co_name) if code else "?",
        "rank": process_rank(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "pid": os.getpid(),
    }


def _kv_record(locals_: dict, frame: Any, notes: list[str]) -> dict[str, Any] | None:
    try:
        found = find_cache(locals_)
        where = None
        if found is None and frame is not None and frame.f_back is not None:
            enclosing = find_enclosing_cache(frame.f_back)
            if enclosing is not None:
                found, where = enclosing[:2], enclosing[2]
        if found is None:
            return None
        path, cache = found
        located = locate_config(locals_)
        report = inspect_cache(cache, config=located[0] if located else None)
        where_name = getattr(where.f_code, "co_qualname", where.f_code.co_name) if where is not None else None
        return {"path": path, "frame": where_name, "report": records_to_json(report)}
    except Exception as exc:  # a cache that cannot be read: the snapshot goes on without it
        notes.append(f"KV cache not saved: {type(exc).__name__}: {exc}")
        return None


def _dims_record(locals_: dict, frame: Any, notes: list[str]) -> dict[str, Any] | None:
    """The dimension sizes ``shapes`` names at this stop (config, module, batch/seq), for ``open`` to reuse."""
    try:
        namer = DimNamer.from_frame(locals_, frame=frame)
    except Exception as exc:  # sizes that cannot be read: the snapshot goes on without them
        notes.append(f"dimension names not saved: {type(exc).__name__}: {exc}")
        return None
    if namer is None:
        return None
    return {"sizes": [[name, size] for name, size in namer.sizes], "source": namer.source,
            "kv_name": namer.kv_name}


def snapshot_document(frame: Any, stack: list, index: int, locals_: dict, *, root: Any = None,
                      header: str | None = None, root_names: dict | None = None) -> dict[str, Any]:
    """Usage: ``snapshot_document(curframe, debugger.stack, curindex, locals_)``; the JSON document."""
    notes: list[str] = []
    try:
        stack_records = records_to_json(model_stack(stack, root))
    except Exception as exc:  # a stack that cannot be read: saved without it
        stack_records = []
        notes.append(f"module stack not saved: {type(exc).__name__}: {exc}")
    return {
        "format": FORMAT,
        "kind": "snapshot",
        "location": location_record(frame),
        "header": header,
        "stack": stack_records,
        "current": index,
        "root_names": records_to_json(root_names or {}),
        "kv": _kv_record(locals_, frame, notes),
        "dims": _dims_record(locals_, frame, notes),
        "notes": notes,
    }
