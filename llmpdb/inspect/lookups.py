"""Why a subscript failed: a key a dict does not hold, an index past a tensor's dim or a sequence's end.

Usage::

    lookup_diagnosis(outputs, "outputs", "past_key_values")
    # "'past_key_values' is not a key of outputs (2 keys: 'logits', 'past_key_value'); did you mean 'past_key_value'?"
    lookup_diagnosis(x, "x", (0, 5)) # "index 5 is out of range for dim 1 of x (size 3)"

``key`` is the subscript as read from the source (``operands.index_keys``-style ints, slices, None,
Ellipsis, or a constant); the container is read without running its code: a dict's keys through
``dict.keys`` (C), only ``str`` and ``int`` keys are shown, a tensor's shape only (never its data).
"""

from __future__ import annotations

import difflib

from .kinds import MISSING, sequence_length
from .safe import is_tensor, no_torch_function

__all__ = ["lookup_diagnosis"]

_SHOWN = 6


def _shape(value) -> tuple[int, ...] | None:
    try:
        with no_torch_function():
            return tuple(int(s) for s in value.shape)
    except Exception:  # a symbolic shape: unknown
        return None


def _tensor_index(shape: tuple[int, ...], text: str, keys: tuple) -> str | None:
    used = [k for k in keys if k is not None and k is not Ellipsis]
    if len(used) > len(shape):
        return f"{len(used)} indices for {text} of {len(shape)} dims {shape}"
    if Ellipsis in [k for k in keys if k is Ellipsis]:
        at = next(i for i, k in enumerate(keys) if k is Ellipsis)
        keys = keys[:at] + (slice(None),) * (len(shape) - len(used)) + keys[at + 1:]
    dim = 0
    for key in keys:
        if key is None:
            continue
        if type(key) is int and not -shape[dim] <= key < shape[dim]:
            return f"index {key} is out of range for dim {dim} of {text} (size {shape[dim]})"
        dim += 1
    return None


def _dict_key(container, text: str, key) -> str | None:
    try:
        keys = list(dict.keys(container))
        held = dict.__contains__(container, key)
    except TypeError:  # an unhashable key
        return None
    if held:
        return None
    shown = [k for k in keys if type(k) in (str, int)]
    more = len(keys) > _SHOWN or len(shown) < len(keys)
    listed = ", ".join(repr(k) for k in shown[:_SHOWN]) + (", …" if more else "")
    count = f"{len(keys)} key{'s' if len(keys) != 1 else ''}"
    text = f"{key!r} is not a key of {text} ({count}{': ' + listed if listed else ''})"
    if type(key) is str:
        close = difflib.get_close_matches(key, [k for k in shown if type(k) is str], n=1)
        if close:
            text += f"; did you mean {close[0]!r}?"
    return text


def lookup_diagnosis(container, text: str, key) -> str | None:
    """Usage: ``lookup_diagnosis(value, "d", "missing")``; see the module docstring. None when the
    container or the key is not known, or nothing is wrong with them as read."""
    if container is MISSING or key is MISSING:
        return None
    if is_tensor(container):
        shape = _shape(container)
        keys = key if type(key) is tuple else (key,)
        return _tensor_index(shape, text, keys) if shape is not None else None
    if issubclass(type(container), dict) and type(key) in (str, int, bool, float, bytes, type(None)):
        return _dict_key(container, text, key)
    length = sequence_length(container)
    if length is not None and type(key) is int and not -length <= key < length:
        return f"index {key} is out of range for {text} of length {length}"
    return None
