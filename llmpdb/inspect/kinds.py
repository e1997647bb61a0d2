"""What an object is, read from its type: never a property, ``__getattr__`` or ``__class__`` of the object.

Usage::

    is_module(model)                 # an nn.Module instance (a class is not one)
    static_attr(obj, "config")       # the attribute as stored (instance dict, class), no code run; MISSING
    has_static(obj, "layers")        # True when the type or the instance dict defines it

A debugger is a guest in the user's process: finding out what a local is must not run the user's code
(a lazy property that sleeps, an object that records attribute access, a mock that answers everything).
``type(obj)`` and ``inspect.getattr_static`` read what is stored without running descriptors or
``__getattr__``; a property found this way is returned as the property object, not called.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

__all__ = ["MISSING", "is_module", "static_attr", "has_static", "type_defines", "class_names"]

MISSING = object()


def static_attr(obj: Any, name: str, default: Any = MISSING) -> Any:
    """Usage: ``static_attr(obj, "config")``; the stored attribute (no property or ``__getattr__`` runs)."""
    try:
        return inspect.getattr_static(obj, name, default)
    except Exception:  # a metaclass or __dict__ that refuses to be read: nothing stored we can see
        return default


def has_static(obj: Any, name: str) -> bool:
    """Usage: ``has_static(cache, "layers")``; the instance dict or the type defines ``name``."""
    return static_attr(obj, name) is not MISSING


def type_defines(obj: Any, name: str) -> bool:
    """Usage: ``type_defines(x, "forward")``; some class of ``type(x).__mro__`` defines ``name``."""
    return any(name in vars(klass) for klass in type(obj).__mro__)


def class_names(obj: Any) -> tuple[str, ...]:
    """Usage: ``class_names(cache)`` -> ``("DynamicCache", "Cache", "object")``; the MRO's class names."""
    return tuple(klass.__name__ for klass in type(obj).__mro__)


def is_module(obj: Any) -> bool:
    """Usage: ``is_module(x)``; True for an ``nn.Module`` instance, never for a class.

    With torch loaded: ``type(x)`` subclasses ``torch.nn.Module``. Otherwise (a module-like object of a
    framework llmpdb does not know), its type must define both ``named_modules`` and ``forward``.
    """
    if obj is None or issubclass(type(obj), type):  # never isinstance: it reads obj.__class__
        return False
    module_type = getattr(sys.modules.get("torch.nn.modules.module"), "Module", None)
    if isinstance(module_type, type) and issubclass(type(obj), module_type):
        return True
    return type_defines(obj, "named_modules") and type_defines(obj, "forward")
