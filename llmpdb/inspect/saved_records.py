"""Inspection records to JSON and back, for files that outlive the process (``snapshot``, ``open``).

Usage::

    doc = records_to_json(model_stack(stack))        # plain JSON data: lists, dicts, strings, numbers
    entries = records_from_json(doc)                 # [StackEntry(...), ...] again, rebuilt by name
    report = records_from_json(records_to_json(inspect_cache(cache)))     # a CacheReport

A record is a dataclass of the known kinds (``StackEntry``, ``ModuleFrame``, ``TensorArg``, ``CacheReport``,
``LayerReport``, ``TensorMeta``), written as ``{"record": "LayerReport", "fields": {...}}``. Fields that hold
live objects (``module``, ``tensor``: anything but a record) are left out; tuples come back as tuples. Decoding builds only those
classes from plain data: an unknown record name is a ``ValueError``, nothing is imported or executed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .frame_kinds import TensorArg
from .kv import CacheReport
from .kv_layers import LayerReport, TensorMeta
from .modules import ModuleFrame, StackEntry

__all__ = ["RECORDS", "records_to_json", "records_from_json"]

RECORDS: dict[str, type] = {cls.__name__: cls for cls in
                            (StackEntry, ModuleFrame, TensorArg, CacheReport, LayerReport, TensorMeta)}
_LIVE = {"module", "tensor"}  # fields that hold the live object: saved only when they hold a record


def records_to_json(value: Any) -> Any:
    """Usage: ``records_to_json(entries)``; records, tuples, lists, dicts and scalars as JSON data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = type(value).__name__
        if RECORDS.get(name) is not type(value):
            raise TypeError(f"{name} is not a record kind that can be saved")
        fields = {f.name: records_to_json(getattr(value, f.name)) for f in dataclasses.fields(value)
                  if f.name not in _LIVE or type(getattr(value, f.name)) in RECORDS.values()}
        return {"record": name, "fields": fields}
    if isinstance(value, (list, tuple)):
        return [records_to_json(v) for v in value]
    if isinstance(value, dict):
        return {"dict": [[records_to_json(k), records_to_json(v)] for k, v in value.items()]}
    if value is None or type(value) in (bool, int, float, str):
        return value
    return str(value)


def records_from_json(data: Any) -> Any:
    """Usage: ``records_from_json(doc)``; the inverse of ``records_to_json`` (lists become tuples)."""
    if isinstance(data, list):
        return tuple(records_from_json(v) for v in data)
    if isinstance(data, dict):
        if set(data) == {"dict"}:
            return {records_from_json(k): records_from_json(v) for k, v in data["dict"]}
        name, fields = data.get("record"), data.get("fields")
        cls = RECORDS.get(name) if isinstance(name, str) else None
        if cls is None or not isinstance(fields, dict):
            raise ValueError(f"unknown record {name!r}")
        known = {f.name for f in dataclasses.fields(cls) if f.init}
        try:
            return cls(**{k: records_from_json(v) for k, v in fields.items() if k in known})
        except TypeError as exc:
            raise ValueError(f"record {name}: {exc}") from None
    return data
