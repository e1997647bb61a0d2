"""Find the model config that is in reach of a frame.

Usage::

    config = find_config(frame.f_locals)            # LlamaConfig(...) or None
    config, where = locate_config(frame.f_locals)   # (..., "self.config") or None
    config_candidates(frame.f_locals)               # [(config, "model.config"), (config2, "t5.config")]

Looked up in order: ``self.config`` (the module whose ``forward`` is running), a ``config`` local, then
the ``model`` local's and every other local's ``.config``: two different ones there (a T5 and a Llama
model in one frame) give no answer rather than an arbitrary one (``config_candidates`` names them); wrapped models are unwrapped one level
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

__all__ = ["find_config", "locate_config", "config_candidates", "looks_like_config", "text_config",
           "describe_config", "describe_candidates"]

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


def _dims_key(config: Any) -> tuple:
    """Configs with one class and the same dimensions name dimensions alike: one candidate, not two."""
    inner = text_config(config)
    return type(config), tuple(_field(inner, key) if type(_field(inner, key)) is int else None
                               for key in CONFIG_KEYS + ("num_key_value_heads", "intermediate_size"))


def config_candidates(locals: Mapping[str, Any]) -> list[tuple[Any, str]]:
    """Usage: ``config_candidates(frame.f_locals)`` -> ``[(config, "model.config"), (cfg2, "t5.config")]``.

    ``self.config`` (the running module's own) or a ``config`` local is the one answer. Otherwise every
    local's config counts, ``model`` first; configs of one class with the same dimensions count once."""
    try:
        names = [n for n in locals.keys() if type(n) is str and not n.startswith("__")]
    except Exception:  # a hostile mapping: no config can be found in it
        return []
    order = ["self", "config", "model"] + [n for n in names if n not in ("self", "config", "model")]
    found: list[tuple[Any, str]] = []
    keys: set = set()
    for name in order:
        if name not in names:
            continue
        try:
            value = locals[name]
        except Exception:  # a mapping that refuses a key it listed
            continue
        if name == "config" and looks_like_config(value):
            return [(value, "config")]
        located = _config_of(value)
        if located is None:
            continue
        if name == "self":
            return [(located[0], "self" + located[1])]
        key = _dims_key(located[0])
        if key not in keys:
            keys.add(key)
            found.append((located[0], name + located[1]))
    return found


def locate_config(locals: Mapping[str, Any]) -> tuple[Any, str] | None:
    """Usage: ``locate_config(frame.f_locals)`` -> ``(config, "self.config")``; None when no config is in
    reach, and when several different ones are (a T5 and a Llama model side by side: which one the
    tensors belong to is not known; ``config_candidates`` lists them)."""
    found = config_candidates(locals)
    return found[0] if len(found) == 1 else None


def find_config(locals: Mapping[str, Any]) -> Any | None:
    """Usage: ``find_config(frame.f_locals)``; the model config in reach of the frame, or None."""
    found = locate_config(locals)
    return None if found is None else found[0]


def describe_config(config: Any, where: str) -> str:
    """Usage: ``describe_config(cfg, "self.config")`` -> ``"self.config (LlamaConfig)"``."""
    return f"{where} ({type_name(config)})"


def describe_candidates(candidates: list[tuple[Any, str]]) -> str:
    """Usage: ``describe_candidates(config_candidates(f_locals))`` -> ``"config ?: model.config (LlamaConfig)
    or t5.config (T5Config)"``."""
    return "config ?: " + " or ".join(describe_config(c, where) for c, where in candidates)

