"""Find the model config that is in reach of a frame.

Usage::

    config = find_config(frame.f_locals)            # LlamaConfig(...) or None
    config, where = locate_config(frame.f_locals)   # (..., "self.config") or None

Looked up in order: ``self.config`` (the module whose ``forward`` is running), a ``config`` local, the
``model`` local's ``.config``, then any other local's ``.config``; wrapped models are unwrapped one level
through ``.module`` (DDP), ``._orig_mod`` (``torch.compile``) and ``.base_model`` (PEFT). Duck-typed: a
config is any object with an integer ``hidden_size``, ``num_attention_heads``, ``n_embd``, ``n_head``,
``d_model`` or ``num_heads`` (directly or on its ``text_config``). transformers is never imported.

No user code runs: a config's fields are read from what it stores (``kinds.stored``; transformers' own
properties at most), a model's ``config`` from the module's dicts (``kinds.module_attr``), and any other
local's ``config`` only when the object stores one in its instance dict. A lazy property or ``__getattr__``
named ``config`` is never called.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .kinds import MISSING, is_a, is_module, library_attr, module_attr, stored
from .safe import is_tensor, type_name

__all__ = ["find_config", "locate_config", "looks_like_config", "text_config", "describe_config"]

CONFIG_KEYS = ("hidden_size", "num_attention_heads", "n_embd", "n_head", "d_model", "num_heads")
_SUBCONFIGS = ("text_config", "language_config", "llm_config")
_WRAPPERS = ("module", "_orig_mod", "base_model")
_SKIP = (type(None), bool, int, float, complex, str, bytes, list, tuple, dict, set, type)


def _field(obj: Any, name: str) -> Any:
    """A config field as stored (or a transformers property): never a user's property or ``__getattr__``."""
    value = library_attr(obj, name)
    return None if value is MISSING else value


def _has_dims(obj: Any) -> bool:
    return any(type(_field(obj, key)) is int for key in CONFIG_KEYS)


def looks_like_config(obj: Any) -> bool:
    """Usage: ``looks_like_config(model.config)``; True for an object carrying transformer dimensions."""
    if obj is None or is_a(obj, *_SKIP) or is_tensor(obj) or is_module(obj):
        return False
    return _has_dims(obj) or any(_has_dims(_field(obj, sub)) for sub in _SUBCONFIGS)


def text_config(config: Any) -> Any:
    """Usage: ``text_config(cfg)``; the sub-config holding the language-model dimensions (or ``cfg``)."""
    if _has_dims(config):
        return config
    for sub in _SUBCONFIGS:
        inner = _field(config, sub)
        if inner is not None and _has_dims(inner):
            return inner
    return config


def _attr_of(obj: Any, name: str) -> Any:
    value = module_attr(obj, name) if is_module(obj) else stored(obj, name)
    return None if value is MISSING else value


def _config_of(obj: Any) -> tuple[Any, str] | None:
    if obj is None or is_a(obj, *_SKIP) or is_tensor(obj):
        return None
    config = _attr_of(obj, "config")
    if looks_like_config(config):
        return config, ".config"
    for wrapper in _WRAPPERS:
        inner = _attr_of(obj, wrapper)
        if inner is None or inner is obj or is_a(inner, *_SKIP):
            continue
        config = _attr_of(inner, "config")
        if looks_like_config(config):
            return config, f".{wrapper}.config"
    return None


def locate_config(locals: Mapping[str, Any]) -> tuple[Any, str] | None:
    """Usage: ``locate_config(frame.f_locals)`` -> ``(config, "self.config")`` or None."""
    try:
        names = [n for n in locals.keys() if type(n) is str and not n.startswith("__")]
    except Exception:  # a hostile mapping: no config can be found in it
        return None
    order = ["self", "config", "model"] + [n for n in names if n not in ("self", "config", "model")]
    for name in order:
        if name not in names:
            continue
        try:
            value = locals[name]
        except Exception:  # a mapping that refuses a key it listed
            continue
        if name == "config" and looks_like_config(value):
            return value, "config"
        found = _config_of(value)
        if found is not None:
            return found[0], name + found[1]
    return None


def find_config(locals: Mapping[str, Any]) -> Any | None:
    """Usage: ``find_config(frame.f_locals)``; the model config in reach of the frame, or None."""
    found = locate_config(locals)
    return None if found is None else found[0]


def describe_config(config: Any, where: str) -> str:
    """Usage: ``describe_config(cfg, "self.config")`` -> ``"self.config (LlamaConfig)"``."""
    return f"{where} ({type_name(config)})"

