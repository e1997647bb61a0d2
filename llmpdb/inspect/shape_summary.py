"""Short text summaries of tensors and nested values: shapes, dtypes, device, layout; never the data.

Usage::

    tensor_summary(mask)                      # "(1, 1, 7, 7) bool"; "(2, 3) bf16 cuda:0 sparse_coo"
    value_summary((cos, sin))                 # "((1, 7, 16) f32, (1, 7, 16) f32)"
    value_summary({"ids": ids, "n": 3})       # "{ids: (1, 7) i64, n: 3}"
    shape_items(args, kwargs)                 # ["(1, 7, 64)", "position_ids=(1, 7)"] for trace rows
    first_dtype(outputs)                      # "f32": the dtype of the first tensor inside, or None

Only type-level checks and tensor metadata are read: containers are walked with the built-in methods of
``dict``/``tuple``/``list`` (a subclass's overridden ``items`` never runs), a ``UserDict`` (transformers'
``BatchEncoding``) through its stored ``data``; any other object is shown by its class name; exact
built-in scalars (int, float, bool, str, None) by their repr.
"""

from __future__ import annotations

from collections import UserDict
from typing import Any

from ..units import format_shape
from .kinds import static_attr
from .safe import is_tensor, safe_getattr, short_dtype

__all__ = ["tensor_summary", "value_summary", "shape_items", "tensor_shape", "first_dtype", "tensor_leaves",
           "named_tensor_leaves"]

_SCALARS = (int, float, bool, complex, type(None))


def tensor_shape(t: Any) -> str:
    """Usage: ``tensor_shape(x)`` -> ``"(1, 7)"``; a ragged (nested) dimension shows as ``?``."""
    try:
        dims = []
        for i in range(t.dim()):
            try:
                dims.append(str(int(t.size(i))))
            except Exception:  # a ragged dimension of a nested tensor has no single size
                dims.append("?")
        return format_shape(dims)
    except Exception as exc:
        return f"(shape failed: {type(exc).__name__})"


def tensor_summary(t: Any) -> str:
    """Usage: ``tensor_summary(x)`` -> ``"(1, 7) i64"``; device shown when not CPU, layout when not strided."""
    parts = [tensor_shape(t), short_dtype(safe_getattr(t, "dtype", "?"))]
    device = str(safe_getattr(t, "device", "cpu"))
    if device != "cpu":
        parts.append(device)
    layout = str(safe_getattr(t, "layout", "torch.strided")).replace("torch.", "")
    if layout != "strided":
        parts.append(layout)
    if safe_getattr(t, "is_nested", False) and layout != "jagged":
        parts.append("nested")
    return " ".join(parts)


def _items(value: Any) -> list[tuple[str | None, Any]] | None:
    """The children of a container as ``(key or None, value)``; None when ``value`` is not one."""
    cls = type(value)
    if issubclass(cls, dict):
        return [(str(k), v) for k, v in dict.items(value)]
    if issubclass(cls, UserDict):
        data = static_attr(value, "data", None)
        return [(str(k), v) for k, v in dict.items(data)] if isinstance(data, dict) else None
    if issubclass(cls, (tuple, list)):
        return [(None, v) for v in (tuple.__iter__(value) if issubclass(cls, tuple) else list.__iter__(value))]
    return None


def _scalar(value: Any) -> str | None:
    if type(value) in _SCALARS:
        return repr(value)
    if type(value) is str:
        return repr(value if len(value) <= 30 else value[:29] + "…")
    return None


def value_summary(value: Any, *, depth: int = 3, items: int = 6) -> str:
    """Usage: ``value_summary(outputs)``; tensors by metadata, containers walked ``depth`` levels deep."""
    if is_tensor(value):
        return tensor_summary(value)
    scalar = _scalar(value)
    if scalar is not None:
        return scalar
    children = _items(value)
    if children is None:
        return type(value).__name__
    is_map = issubclass(type(value), (dict, UserDict))
    if depth <= 0:
        return f"{type(value).__name__} of {len(children)}"
    shown = []
    for key, child in children[:items]:
        text = value_summary(child, depth=depth - 1, items=items)
        shown.append(f"{key}: {text}" if is_map else text)
    if len(children) > items:
        shown.append(f"… +{len(children) - items}")
    if is_map:
        body = "{" + ", ".join(shown) + "}"
        return body if type(value) in (dict,) else f"{type(value).__name__}{body}"
    if issubclass(type(value), tuple):
        return "(" + ", ".join(shown) + ("," if len(shown) == 1 else "") + ")"
    return "[" + ", ".join(shown) + "]"


def tensor_leaves(value: Any, *, depth: int = 3) -> list[Any]:
    """Usage: ``tensor_leaves(outputs)``; the tensors inside ``value`` (containers ``depth`` levels deep)."""
    if is_tensor(value):
        return [value]
    children = _items(value) if depth > 0 else None
    if not children:
        return []
    found: list[Any] = []
    for _, child in children:
        found.extend(tensor_leaves(child, depth=depth - 1))
    return found


def named_tensor_leaves(value: Any, base: str = "output", *, depth: int = 3) -> list[tuple[str, Any]]:
    """Usage: ``named_tensor_leaves(out)`` -> ``[("output[0]", t), ("output.logits", l)]``; tensors by path."""
    if is_tensor(value):
        return [(base, value)]
    children = _items(value) if depth > 0 else None
    if not children:
        return []
    found: list[tuple[str, Any]] = []
    for i, (key, child) in enumerate(children):
        found.extend(named_tensor_leaves(child, f"{base}.{key}" if key is not None else f"{base}[{i}]",
                                         depth=depth - 1))
    return found


def _shapes_of(value: Any, depth: int) -> str | None:
    """Shapes only (no dtype), nested as tuples; None when nothing inside is a tensor."""
    if is_tensor(value):
        return tensor_shape(value)
    children = _items(value) if depth > 0 else None
    if not children:
        return None
    inner = [s for s in (_shapes_of(c, depth - 1) for _, c in children) if s is not None]
    if not inner:
        return None
    return inner[0] if len(inner) == 1 and len(children) == 1 else "(" + ", ".join(inner) + ")"


def shape_items(args: Any = (), kwargs: Any = None, *, limit: int = 3) -> list[str]:
    """Usage: ``shape_items(args, kwargs)`` -> ``["(1, 7, 64)", "position_ids=(1, 7)"]``.

    Positional arguments (or a module's output) first, keyword arguments by name; values holding no tensor
    are left out; more than ``limit`` items end with ``+N``."""
    found: list[str] = []
    children = _items(args)
    positional = children if children is not None and not issubclass(type(args), (dict, UserDict)) else None
    if positional is None:
        named = children or []
        text = _shapes_of(args, 0) if children is None else None
        if text is not None:
            found.append(text)
    else:
        named = []
        for _, child in positional:
            text = _shapes_of(child, 3)
            if text is not None:
                found.append(text)
    if kwargs:
        named = named + (_items(kwargs) or [])
    for key, child in named:
        text = _shapes_of(child, 3)
        if text is not None:
            found.append(f"{key}={text}")
    if len(found) > limit:
        found = found[:limit] + [f"+{len(found) - limit}"]
    return found


def first_dtype(value: Any) -> str | None:
    """Usage: ``first_dtype((hidden, weights))`` -> ``"f32"``; None when no tensor is inside."""
    leaves = tensor_leaves(value)
    return short_dtype(safe_getattr(leaves[0], "dtype", "?")) if leaves else None
