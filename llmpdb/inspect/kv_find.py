"""Find a KV cache: in a frame's locals, in the model frames around it; tell a cache from a look-alike.

Usage::

    path, cache = find_cache(frame.f_locals)                  # or None: nothing cache-like in reach
    path, cache, where = find_enclosing_cache(frame.f_back)   # the cache of an enclosing model frame
    looks_like_cache(x); is_kv_pair(layer_past); unwrap_cache(outputs)   # -> (".cache", cache)

A cache is recognised by its type (a transformers ``Cache`` class) or by what the object stores
(``layers`` of key/value tensors, ``key_cache``/``value_cache`` lists, ``(k, v)`` tuples), never by asking
it: properties, ``__getattr__`` and ``__class__`` of user objects are not touched (``kinds.library_attr``),
so a lazy wrapper or a mock in the frame is passed over without running its code.
"""

from __future__ import annotations

from typing import Any

from .frames import frame_locals, frame_self
from .kinds import MISSING, instance_dict, is_a, is_hf, is_module, library_attr, sequence_items, sequence_length
from .safe import is_tensor

__all__ = ["SEARCHED", "cache_attr", "find_cache", "find_enclosing_cache", "looks_like_cache", "is_kv_pair",
           "unwrap_cache"]

SEARCHED = "past_key_values, cache, outputs.cache / .past_key_values, model_kwargs['cache'], every local, self.*"
_NAMES = ("past_key_values", "cache", "past_key_value", "layer_past", "past", "kv_cache", "cache_params")
_OUTPUT_NAMES = ("outputs", "output", "out", "model_outputs", "result", "res", "ret")
_DICT_NAMES = ("model_kwargs", "model_inputs", "kwargs")
_CACHE_ATTRS = ("cache", "past_key_values")
_MAX_LAYERS = 4096


def cache_attr(obj: Any, name: str, default: Any = None) -> Any:
    """Usage: ``cache_attr(cache, "layers")``; what ``obj`` stores under ``name`` (or a transformers
    property of it), else ``default``: no user code runs."""
    value = library_attr(obj, name)
    return default if value is MISSING else value


_get = cache_attr
_seq = sequence_items


def _is_entry(entry: Any, strict: bool) -> bool:
    if not 2 <= (sequence_length(entry) or 0) <= 6:
        return False
    items = _seq(entry)
    if items is None or not (2 <= len(items) <= 6 and is_tensor(items[0]) and is_tensor(items[1])):
        return False
    k, v = items[0], items[1]
    return not strict or (k.dim() == 4 and v.dim() == 4 and k.shape[:-1] == v.shape[:-1])


def is_kv_pair(obj: Any) -> bool:
    """Usage: ``is_kv_pair(layer_past)``; True for one layer's ``(keys, values)``: two tensors of one rank."""
    items = _seq(obj) if sequence_length(obj) == 2 else None
    return (items is not None and is_tensor(items[0]) and is_tensor(items[1])
            and items[0].dim() == items[1].dim())


def looks_like_cache(obj: Any, *, strict: bool = False) -> bool:
    """Usage: ``looks_like_cache(x)``; True for transformers caches (any version) and ``((k, v), ...)`` tuples.

    ``strict`` (for locals found by scanning, not by name) accepts only tuples of 4-D ``(k, v)`` pairs
    of matching (batch, heads, seq), so a list of ``(input, target)`` tensor pairs is not taken for a cache.
    """
    if obj is None or is_tensor(obj) or is_a(obj, str, bytes, int, float, dict, type):
        return False
    length = sequence_length(obj)
    if length is not None:  # a long list (a data set of (x, y) pairs) is never copied
        return 0 < length <= _MAX_LAYERS and all(_is_entry(e, strict) for e in _seq(obj))
    if _get(obj, "self_attention_cache") is not None and _get(obj, "cross_attention_cache") is not None:
        return True
    layers = _seq(_get(obj, "layers"))
    if layers is not None:
        if not layers:
            return is_hf(obj, "Cache") or type(obj).__name__.endswith("Cache")
        return _looks_like_layer(layers[0])
    if _seq(_get(obj, "key_cache")) is not None and _seq(_get(obj, "value_cache")) is not None:
        return True
    return _seq(_get(obj, "conv_states")) is not None and _seq(_get(obj, "ssm_states")) is not None


def _looks_like_layer(layer: Any) -> bool:
    """A cache layer holds ``keys``/``values`` (tensors, or None before the first update), or state dicts."""
    for name in ("keys", "values"):
        value = _get(layer, name, MISSING)
        if value is not MISSING and (value is None or is_tensor(value)):
            return True
    return any(is_a(_get(layer, name), dict, list) for name in ("conv_states", "recurrent_states"))


def unwrap_cache(obj: Any) -> tuple[str, Any] | None:
    """Usage: ``unwrap_cache(outputs)`` -> ``(".cache", cache)``; the cache itself gives ``("", obj)``."""
    if looks_like_cache(obj):
        return "", obj
    if is_tensor(obj) or is_a(obj, str, bytes, int, float, type) or obj is None:
        return None
    attrs = instance_dict(obj)  # instance attributes: transformers' `past_key_values` alias is a property that warns
    for attr in _CACHE_ATTRS:
        if attr in attrs:
            value = attrs[attr]
        elif attr == "past_key_values" and "cache" in attrs:
            continue  # transformers 5's alias of `cache`: a property that logs a deprecation warning
        else:
            value = _get(obj, attr)
        if looks_like_cache(value):
            return f".{attr}", value
    if is_a(obj, dict):
        for key in _CACHE_ATTRS:  # dict's own get: ModelOutput's `in`/`get` translate and warn
            value = dict.get(obj, key)
            if looks_like_cache(value):
                return f"[{key!r}]", value
    return None


def _checked(check, value: Any, name: str, skipped: list[str] | None, **kwargs) -> Any:
    """``check(value)``; an object that raises while looked at (a tensor subclass whose ``dim()`` raises)
    is skipped, its name and error kept in ``skipped``, so one hostile local never blanks the search."""
    try:
        return check(value, **kwargs)
    except Exception as exc:
        if skipped is not None and all(not s.startswith(f"{name} ") for s in skipped):
            skipped.append(f"{name} ({type(exc).__name__})")
        return None


def find_cache(local_vars: dict[str, Any], *, scan: bool = True,
               skipped: list[str] | None = None) -> tuple[str, Any] | None:
    """Usage: ``find_cache(frame.f_locals)`` -> ``("past_key_values", cache)`` or None.

    Looks at the usual argument names, model outputs (``outputs.cache``), ``model_kwargs['cache']``, then
    (with ``scan``) any cache-like local, then ``self``'s instance attributes. A local that raises while
    looked at is passed over (``"name (Error)"`` appended to ``skipped``).
    """
    for name in _NAMES:
        if name in local_vars and _checked(looks_like_cache, local_vars[name], name, skipped):
            return name, local_vars[name]
    for name, value in local_vars.items():
        if name in _OUTPUT_NAMES or name in _DICT_NAMES or "Output" in type(value).__name__:
            found = _checked(unwrap_cache, value, str(name), skipped)
            if found is not None:
                return name + found[0], found[1]
    if not scan:
        return None
    for name, value in local_vars.items():
        if not name.startswith("__") and _checked(looks_like_cache, value, name, skipped, strict=True):
            return name, value
    owner = local_vars.get("self")
    attrs = dict(instance_dict(owner)) if owner is not None else {}
    for name, value in attrs.items():
        if _checked(looks_like_cache, value, f"self.{name}", skipped, strict=True):
            return f"self.{name}", value
    return None


def find_enclosing_cache(frame: Any, *, limit: int = 200,
                         skipped: list[str] | None = None) -> tuple[str, Any, Any] | None:
    """Usage: ``find_enclosing_cache(frame.f_back)`` -> ``("cache", cache, decoder_layer_frame)`` or None.

    Where a frame holds no cache (``LlamaMLP.forward``), the model frames around it do: the frames from
    ``frame`` outwards whose ``self`` is an ``nn.Module`` are searched first, innermost first, by the usual
    names (``cache``, ``past_key_values``, ``outputs.cache``, ``model_kwargs['cache']``); then every other
    frame by the same names (``generate``'s ``model_kwargs``). Returns the frame it was found in.
    """
    frames = []
    while frame is not None and len(frames) < limit:
        frames.append(frame)
        frame = frame.f_back
    modules = [f for f in frames if is_module(frame_self(f))]
    for candidate in modules + [f for f in frames if all(f is not m for m in modules)]:
        found = find_cache(frame_locals(candidate), scan=False, skipped=skipped)
        if found is not None:
            return found[0], found[1], candidate
    return None
