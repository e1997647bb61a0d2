"""What an object is, read from its type: never a property, ``__getattr__`` or ``__class__`` of the object.

Usage::

    is_module(model)                 # an nn.Module instance (a class is not one)
    static_attr(obj, "config")       # the attribute as stored (instance dict, class), no code run; MISSING
    has_static(obj, "layers")        # True when the type or the instance dict defines it
    stored(obj, "layers")            # the value the instance stores (dict, slot, plain class value); MISSING
    library_attr(cache, "is_sliding")  # stored, or a property of transformers/torch code; MISSING otherwise
    module_attr(model, "config")     # an nn.Module's attribute from its dicts (_modules, _parameters...)
    is_hf(obj, "Cache")              # a class of that name from transformers in type(obj).__mro__
    is_a(x, tuple, list)             # isinstance by type(x) alone (never x.__class__)
    sequence_items(obj)              # a tuple's / list's items read in C (an overridden __iter__ never runs)
    sequence_length(obj)             # its length read in C (None: not a tuple or list); never copies it

A debugger is a guest in the user's process: finding out what a local is must not run the user's code
(a lazy property that sleeps, an object that records attribute access, a mock that answers everything).
``type(obj)`` and ``inspect.getattr_static`` read what is stored without running descriptors or
``__getattr__``; a property found this way is returned as the property object, not called.

Reading what an instance stores (its ``__dict__`` through the standard descriptor, a slot) runs no code
and is allowed on any object. Code is called only when it is library code: ``library_attr`` runs a
property (and ``library_method`` returns a method) only when the class that defines it comes from
transformers or torch, and the type has no ``__getattribute__`` of another origin.
"""

from __future__ import annotations

import sys
import types
from typing import Any

__all__ = [
    "MISSING", "is_module", "static_attr", "has_static", "type_defines", "class_names", "instance_dict",
    "stored", "library_attr", "library_method", "module_attr", "is_hf", "is_library_type", "sequence_items",
    "sequence_length", "sequence_iter", "library_defines",
    "is_a",
]

_LIBRARIES = ("transformers", "torch")
_DICT_DESCRIPTOR = type(vars(type("_Probe", (), {}))["__dict__"])  # the getset descriptor every class gets

MISSING = object()


def is_a(obj: Any, *classes: type) -> bool:
    """Usage: ``is_a(x, tuple, list)``; ``isinstance`` by ``type(x)`` alone (``isinstance`` falls back to
    ``x.__class__``, which a user's ``__getattribute__`` or ``__class__`` property answers)."""
    return issubclass(type(obj), classes)


def _is_data_descriptor(value: Any) -> bool:
    return type_defines(value, "__get__") and (type_defines(value, "__set__") or type_defines(value, "__delete__"))


def static_attr(obj: Any, name: str, default: Any = MISSING) -> Any:
    """Usage: ``static_attr(obj, "config")``; the stored attribute (no property or ``__getattr__`` runs).

    ``inspect.getattr_static``'s rule (a data descriptor of the class wins over the instance dict, then the
    instance dict, then the class), written on ``type(obj).__mro__`` and the class dicts: code traced by
    torch.compile (a stop inside a compiled function) cannot run ``getattr_static``'s own descriptor reads.
    """
    try:
        if is_a(obj, type):
            for klass in (*obj.__mro__, *type(obj).__mro__):
                if name in klass.__dict__:
                    return klass.__dict__[name]
            return default
        found = MISSING
        for klass in type(obj).__mro__:
            if name in klass.__dict__:
                found = klass.__dict__[name]
                break
        own = instance_dict(obj)
        if name in own and not (found is not MISSING and _is_data_descriptor(found)):
            return own[name]
        return default if found is MISSING else found
    except Exception:  # a class dict or mapping that refuses to be read: nothing stored we can see
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

    With torch loaded: ``type(x)`` subclasses ``torch.nn.Module``, nothing else (a user's object whose
    ``named_modules`` is a property or a proxy is not a model: calling it would run the user's code).
    Without torch (a module-like object of a framework llmpdb does not know), its type must define both
    ``named_modules`` and ``forward`` as plain functions.
    """
    if obj is None or issubclass(type(obj), type):  # never isinstance: it reads obj.__class__
        return False
    module_type = getattr(sys.modules.get("torch.nn.modules.module"), "Module", None)
    if isinstance(module_type, type):
        return issubclass(type(obj), module_type)
    return all(type(static_attr(obj, name)) is types.FunctionType for name in ("named_modules", "forward"))


_TYPE_MODULE = type.__dict__["__module__"]  # read through type's own descriptor: a metaclass cannot answer


def _from_library(klass: type) -> bool:
    try:
        module = _TYPE_MODULE.__get__(klass, type(klass))
    except Exception:  # a class without a module name
        return False
    return type(module) is str and module.split(".", 1)[0] in _LIBRARIES


def is_library_type(obj: Any) -> bool:
    """Usage: ``is_library_type(cache)``; ``type(obj)`` itself comes from transformers or torch."""
    return _from_library(type(obj))


def is_hf(obj: Any, *names: str) -> bool:
    """Usage: ``is_hf(cfg, "PretrainedConfig", "PreTrainedConfig")``; a class of one of those names,
    defined in transformers, is in ``type(obj).__mro__`` (a user class of the same name is not)."""
    return any(klass.__name__ in names and _from_library(klass) for klass in type(obj).__mro__)


def instance_dict(obj: Any) -> dict:
    """Usage: ``instance_dict(obj)``; the instance's own ``__dict__`` ({} when it has none, or when its
    class replaces ``__dict__`` with code of its own). Read through the standard descriptor: no code runs."""
    for klass in type(obj).__mro__:
        descriptor = klass.__dict__.get("__dict__")
        if descriptor is None:
            continue
        if type(descriptor) not in (_DICT_DESCRIPTOR, types.MemberDescriptorType):  # C-level readers only
            return {}
        try:  # the standard descriptor answers: object.__getattribute__ skips any user __getattribute__
            found = object.__getattribute__(obj, "__dict__")
        except Exception:  # a C type whose descriptor refuses this instance
            return {}
        return found if type(found) is dict else {}
    return {}


def stored(obj: Any, name: str, default: Any = MISSING) -> Any:
    """Usage: ``stored(cache, "layers")``; what the instance stores under ``name``, else ``default``.

    The instance dict, a ``__slots__`` member, or a plain (non-descriptor) class attribute; a property, a
    method or ``__getattr__`` is never run (a property gives ``default``).
    """
    value = static_attr(obj, name)
    if value is MISSING:
        return default
    getter = type_defines(value, "__get__")
    if not getter:
        return value
    if type(value) is types.MemberDescriptorType:  # a slot: read in C
        try:
            return value.__get__(obj, type(obj))
        except AttributeError:  # an empty slot
            return default
    return default


def _owner(obj: Any, name: str) -> type | None:
    for klass in type(obj).__mro__:
        if name in klass.__dict__:
            return klass
    return None


def library_defines(obj: Any, *names: str) -> bool:
    """Usage: ``library_defines(env, "items", "__getitem__")``; each name is defined (and so would run code)
    only in the standard library, transformers or torch, never in a user's class."""
    for name in names:
        owner = _owner(obj, name)
        if owner is None:
            return False
        try:
            module = _TYPE_MODULE.__get__(owner, type(owner))
        except Exception:  # a class without a module name
            return False
        top = module.split(".", 1)[0] if type(module) is str else ""
        if top not in _LIBRARIES and top not in sys.stdlib_module_names and top != "builtins":
            return False
    return True


def _runs_only_library_code(obj: Any, name: str) -> bool:
    """Reading ``obj.name`` would run code of transformers/torch (or CPython) only."""
    for hook in ("__getattribute__", "__getattr__"):
        owner = _owner(obj, hook)
        if owner is not None and owner is not object and not _from_library(owner):
            return False
    owner = _owner(obj, name)
    return owner is not None and _from_library(owner)


def library_attr(obj: Any, name: str, default: Any = MISSING) -> Any:
    """Usage: ``library_attr(cache, "is_sliding")``; ``stored(obj, name)``, else a property of transformers
    or torch code (called, its exception giving ``default``); never a user's property or ``__getattr__``."""
    value = stored(obj, name)
    if value is not MISSING:
        return value
    descriptor = static_attr(obj, name)
    if descriptor is MISSING or not isinstance(descriptor, property) or not _runs_only_library_code(obj, name):
        return default
    try:
        return getattr(obj, name)
    except Exception:  # library code that raises on this object (an empty cache, say)
        return default


def library_method(obj: Any, name: str) -> Any:
    """Usage: ``library_method(cache, "get_seq_length")``; the bound method when transformers or torch
    defines it (and no user ``__getattribute__`` is in the way), else None."""
    func = static_attr(obj, name)
    if not isinstance(func, types.FunctionType) or not _runs_only_library_code(obj, name):
        return None
    return types.MethodType(func, obj)


def module_attr(module: Any, name: str, default: Any = MISSING) -> Any:
    """Usage: ``module_attr(model, "config")``; an ``nn.Module``'s attribute from its instance dict or its
    ``_modules`` / ``_parameters`` / ``_buffers`` (where ``nn.Module.__setattr__`` keeps them), else a
    property of torch/transformers code (``OptimizedModule.training``); a user's property never runs."""
    value = stored(module, name)
    if value is not MISSING:
        return value
    own = instance_dict(module)
    for table in ("_modules", "_parameters", "_buffers"):
        entries = own.get(table)
        if type(entries) is dict and name in entries:
            return entries[name]
    return library_attr(module, name, default)


def sequence_length(obj: Any) -> int | None:
    """Usage: ``sequence_length(past)``; the length of a tuple or list (subclasses included) read in C
    (an overridden ``__len__`` never runs), None for anything else."""
    cls = type(obj)
    if issubclass(cls, tuple):
        return tuple.__len__(obj)
    if issubclass(cls, list):
        return list.__len__(obj)
    return None


def sequence_iter(obj: Any):
    """Usage: ``sequence_iter(big_list)``; a lazy C iterator over a tuple's or list's items, or None."""
    cls = type(obj)
    if issubclass(cls, tuple):
        return tuple.__iter__(obj)
    if issubclass(cls, list):
        return list.__iter__(obj)
    return None


def sequence_items(obj: Any) -> list | None:
    """Usage: ``sequence_items(past)``; the items of a tuple or list (subclasses included) read in C, so an
    overridden ``__iter__``/``__getitem__`` never runs; None for anything else. Copies: check
    ``sequence_length`` first where the object may be large."""
    items = sequence_iter(obj)
    return None if items is None else list(items)
