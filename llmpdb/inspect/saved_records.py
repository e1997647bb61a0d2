"""Inspection records to JSON and back, for files that outlive the process (``snapshot``, ``open``).

Usage::

    doc = records_to_json(model_stack(stack))        # plain JSON data: lists, dicts, strings, numbers
    entries = records_from_json(doc)                 # [StackEntry(...), ...] again, rebuilt by name
    report = records_from_json(records_to_json(inspect_cache(cache)))     # a CacheReport

A record is a dataclass of the known kinds (``StackEntry``, ``ModuleFrame``, ``TensorArg``, ``CacheReport``,
``LayerReport``, ``TensorMeta``), written as ``{"record": "LayerReport", "fields": {...}}``. Fields that hold
live objects (``module``, ``tensor``: anything but a record) are left out; tuples come back as tuples. Decoding builds only those
classes from plain data: an unknown record name, a malformed ``dict`` or nesting deeper than ``MAX_DEPTH``
is a ``ValueError`` (the only exception it raises), nothing is imported or executed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .frame_kinds import TensorArg
from .kv import CacheReport
from .kv_layers import LayerReport, TensorMeta
from .modules import ModuleFrame, StackEntry

__all__ = ["RECORDS", "MAX_DEPTH", "records_to_json", "records_from_json"]

MAX_DEPTH = 64  # a stack entry is 4 levels deep; a record nested hundreds deep is hostile

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


def records_from_json(data: Any, _depth: int = 0) -> Any:
    """Usage: ``records_from_json(doc)``; the inverse of ``records_to_json`` (lists become tuples).
    ``ValueError`` (one line) for anything that is not such a document."""
    if _depth > MAX_DEPTH:
        raise ValueError(f"records nested more than {MAX_DEPTH} deep")
    if isinstance(data, list):
        return tuple(records_from_json(v, _depth + 1) for v in data)
    if isinstance(data, dict):
        if set(data) == {"dict"}:
            pairs = data["dict"]
            if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
                raise ValueError("a saved dict is not a list of [key, value] pairs")
            out = {}
            for k, v in pairs:
                key = records_from_json(k, _depth + 1)
                try:
                    hash(key)
                except TypeError:
                    raise ValueError(f"a saved dict key of type {type(key).__name__} cannot be a key") from None
                out[key] = records_from_json(v, _depth + 1)
            return out
        name, fields = data.get("record"), data.get("fields")
        cls = RECORDS.get(name) if isinstance(name, str) else None
        if cls is None or not isinstance(fields, dict):
            raise ValueError(f"unknown record {name!r}"[:120])
        known = {f.name for f in dataclasses.fields(cls) if f.init}
        values = {k: records_from_json(v, _depth + 1) for k, v in fields.items() if k in known}
        try:
            return cls(**values)
        except (TypeError, ValueError, AttributeError, ArithmeticError, LookupError) as exc:
            raise ValueError(f"record {name}: {exc}"[:160]) from None
    return data
