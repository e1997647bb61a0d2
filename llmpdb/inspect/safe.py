"""Guarded access to user objects: repr, attributes and tensor checks that never raise.

Usage::

    safe_repr(obj, 80)                 # '<Hostile object (repr failed: RuntimeError: no)>' if repr raises
    safe_getattr(module, "config")     # None if the attribute is missing or its property raises
    is_tensor(x)                       # True for torch.Tensor and subclasses; never imports torch

Any attribute access or ``repr`` on a user object may run arbitrary code and raise; everything here turns
such failures into values. ``safe_repr`` never reads tensor data: a tensor is described by its metadata.
"""

from __future__ import annotations

import reprlib
import sys
from typing import Any

from ..units import format_shape

__all__ = ["safe_repr", "safe_getattr", "is_tensor", "short_dtype", "tensor_brief", "type_name"]

_MISSING = object()

_DTYPES = {
    "float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64", "bool": "bool",
    "complex32": "c32", "complex64": "c64", "complex128": "c128",
    "quint8": "qu8", "qint8": "qi8", "qint32": "qi32", "quint4x2": "qu4x2", "quint2x4": "qu2x4",
    "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2", "float8_e4m3fnuz": "f8e4m3uz",
    "float8_e5m2fnuz": "f8e5m2uz", "float8_e8m0fnu": "f8e8m0", "float4_e2m1fn_x2": "f4e2m1x2",
}


def type_name(obj: Any) -> str:
    """Usage: ``type_name(x)`` -> ``"LlamaForCausalLM"``; the class name, read from ``type()`` (no user code)."""
    return type(obj).__name__


def short_dtype(dtype: Any) -> str:
    """Usage: ``short_dtype(torch.bfloat16)`` -> ``"bf16"``; unknown dtypes keep their torch name."""
    name = str(dtype)
    name = name[6:] if name.startswith("torch.") else name
    return _DTYPES.get(name, name)


def is_tensor(obj: Any) -> bool:
    """Usage: ``is_tensor(x)``; True for ``torch.Tensor`` instances (Parameter, FakeTensor, DTensor...).

    Never imports torch: if the debuggee did not import it, nothing can be a tensor.
    """
    torch = sys.modules.get("torch")
    tensor_type = getattr(torch, "Tensor", None) if torch is not None else None
    if not isinstance(tensor_type, type):
        return False
    return issubclass(type(obj), tensor_type)  # never isinstance: it reads obj.__class__ (user code)


def _shape_text(t: Any) -> str:
    try:
        dims = []
        for i in range(t.dim()):
            try:
                dims.append(str(int(t.size(i))))
            except Exception:  # nested/symbolic dimension: no concrete size
                dims.append("?")
        return format_shape(dims)
    except Exception as exc:
        return f"(shape failed: {type(exc).__name__})"


def tensor_brief(t: Any) -> str:
    """Usage: ``tensor_brief(p)`` -> ``"<Parameter f32 (4, 64)>"``; metadata only, never reads data."""
    try:
        dtype = short_dtype(t.dtype)
    except Exception:  # a dtype that cannot be read shows as ?
        dtype = "?"
    return f"<{type_name(t)} {dtype} {_shape_text(t)}>"


def _repr_failed(obj: Any, exc: BaseException) -> str:
    return f"<{type_name(obj)} object (repr failed: {type(exc).__name__}: {exc})>"


class _SafeRepr(reprlib.Repr):
    """reprlib with tensors described by metadata and a visible note when an object's repr raises."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = 6
        self.maxstring = 60
        self.maxother = 60

    def repr1(self, x: Any, level: int) -> str:
        if is_tensor(x):
            return tensor_brief(x)
        return super().repr1(x, level)

    def repr_instance(self, x: Any, level: int) -> str:
        try:
            text = repr(x)
        except Exception as exc:
            return _repr_failed(x, exc)
        if not isinstance(text, str):
            return f"<{type_name(x)} object (repr returned {type_name(text)})>"
        return text if len(text) <= self.maxother else text[: self.maxother - 1] + "…"


_REPR = _SafeRepr()


def safe_repr(obj: Any, limit: int = 80) -> str:
    """Usage: ``safe_repr(obj, 80)``; a repr cut to ``limit`` characters that never raises.

    Containers are abbreviated (reprlib), tensors shown as ``<Tensor f32 (2, 3)>``, and an object whose
    ``__repr__`` raises becomes ``<Type object (repr failed: Error: message)>``.
    """
    try:
        text = _REPR.repr(obj)
    except Exception as exc:  # reprlib itself tripped on a hostile container
        text = _repr_failed(obj, exc)
    text = text.replace("\n", " ")
    if limit > 0 and len(text) > limit:
        text = text[: max(limit - 1, 0)] + "…"
    return text


def safe_getattr(obj: Any, name: str, default: Any = None) -> Any:
    """Usage: ``safe_getattr(obj, "config", None)``; ``default`` when the attribute is missing or raises.

    This runs the object's properties and ``__getattr__``: use it only on objects whose type is known
    (a tensor, a module, a transformers class); ``kinds.stored`` / ``kinds.library_attr`` for anything else.
    """
    try:
        return getattr(obj, name, default)
    except Exception:  # a property or __getattr__ that raises anything, not only AttributeError
        return default
