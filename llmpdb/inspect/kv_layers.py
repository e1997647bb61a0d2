"""One KV-cache layer, duck-typed: transformers cache layers of any version, ``(k, v)`` tuples, stats.

Usage::

    layer = inspect_layer(cache.layers[0], 0)        # LayerReport: kind, keys/values metadata, fill, capacity
    layer = tuple_layer((k, v), 0)                   # older transformers / plain PyTorch caches

Only metadata is read (shape, dtype, device, nbytes), except one length scalar for static layers whose
``cumulative_length`` is a tensor. Which attributes mean what comes from transformers' ``cache_utils.py``:
``keys``/``values`` (attention), ``max_cache_len`` (preallocated: tensor length is the capacity),
``cumulative_length[_int]`` (tokens seen), ``sliding_window``/``is_sliding``, ``_quantized_keys``
(quantized store; ``keys`` is only the residual), ``conv_states``/``recurrent_states`` (linear attention).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .kinds import (MISSING, instance_dict, is_a, is_library_type, library_attr, library_method, sequence_items,
                    stored, type_defines)
from .safe import is_tensor, short_dtype

__all__ = [
    "TensorMeta",
    "LayerReport",
    "inspect_layer",
    "tuple_layer",
    "empty_layer",
    "tensor_meta",
    "read_length",
]

_STATE_ATTRS = ("conv_states", "recurrent_states", "ssm_states")
_QUANT_ATTRS = ("_quantized_keys", "_quantized_values")
_HANDLED = {"keys", "values", *_STATE_ATTRS, *_QUANT_ATTRS}


@dataclass(frozen=True)
class TensorMeta:
    """Metadata of one tensor held by a cache (``tensor`` keeps the object for ``--stats``, never compared)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    device: str
    nbytes: int
    itemsize: int = 0
    tensor: Any = field(default=None, repr=False, compare=False)


def tensor_meta(name: str, t: Any) -> TensorMeta:
    """Usage: ``tensor_meta("keys", layer.keys)``; shape/dtype/device/nbytes only (works on meta tensors)."""
    try:
        itemsize = int(t.element_size())
        nbytes = int(t.numel()) * itemsize
    except Exception:  # a tensor subclass without numel/element_size: count nothing rather than guess
        itemsize = nbytes = 0
    return TensorMeta(name, tuple(int(d) for d in t.shape), short_dtype(t.dtype), str(t.device), nbytes, itemsize, t)


@dataclass(frozen=True)
class LayerReport:
    """One cache layer. ``filled``: positions holding tokens now; ``seen``: tokens processed (``get_seq_length``);
    ``capacity``: preallocated length (None = grows); ``quantized``: tokens in the quantized store."""

    index: int
    kind: str
    class_name: str
    part: str = ""
    keys: TensorMeta | None = None
    values: TensorMeta | None = None
    filled: int | None = None
    seen: int | None = None
    capacity: int | None = None
    window: int | None = None
    quantized: int | None = None
    residual_capacity: int | None = None
    states: tuple[TensorMeta, ...] = ()
    extras: tuple[TensorMeta, ...] = ()
    home_device: str | None = None
    initialized: bool = True
    notes: tuple[str, ...] = ()

    @property
    def has_attention(self) -> bool:
        """True when the layer stores (or will store) keys and values."""
        return self.kind not in ("linear", "dummy", "unknown")

    @property
    def geometry(self) -> TensorMeta | None:
        """The 4-D (batch, heads, seq, head_dim) tensor heads and head_dim are read from, if any."""
        for meta in (self.keys, *[e for e in self.extras if e.name.startswith("_quantized_keys")]):
            if meta is not None and len(meta.shape) == 4:
                return meta
        return None

    @property
    def kv_heads(self) -> int | None:
        geo = self.geometry
        return geo.shape[1] if geo else None

    @property
    def head_dim(self) -> int | None:
        geo = self.geometry
        return geo.shape[-1] if geo else None

    @property
    def v_head_dim(self) -> int | None:
        if self.values is not None and len(self.values.shape) == 4:
            return self.values.shape[-1]
        return self.head_dim

    @property
    def batch(self) -> int | None:
        geo = self.geometry
        return geo.shape[0] if geo else None

    @property
    def tensors(self) -> tuple[TensorMeta, ...]:
        """Every tensor the layer holds, keys and values first."""
        return tuple(m for m in (self.keys, self.values) if m is not None) + self.states + self.extras

    @property
    def nbytes(self) -> int:
        """Bytes of the tensors the layer holds (0-d bookkeeping scalars such as lengths not counted)."""
        return sum(m.nbytes for m in self.tensors if m.shape != ())


def _get(obj: Any, name: str, default: Any = None) -> Any:
    """What the layer stores under ``name`` (or a transformers property); a user's property never runs."""
    value = library_attr(obj, name)
    return default if value is MISSING else value


def read_length(value: Any, notes: list[str]) -> int | None:
    """Usage: ``read_length(layer.cumulative_length, notes)``; an int, or one scalar tensor read (None on meta).

    Anything else is None: ``int()`` of an unknown object would run its ``__int__``.
    """
    if is_a(value, bool) or value is None:
        return None
    if is_a(value, int):
        return int(value)
    if is_tensor(value):
        if value.numel() != 1:
            return None
        if value.device.type == "meta":
            notes.append("length is a meta tensor: fill unknown")
            return None
        try:
            return int(value.item())
        except Exception as exc:  # fake tensors, tensors under tracing
            notes.append(f"length scalar unreadable ({type(exc).__name__})")
            return None
    return None


def _seq_len(meta: TensorMeta | None) -> int | None:
    if meta is None or len(meta.shape) < 2:
        return 0 if meta is not None and meta.shape in ((0,), ()) else None
    return meta.shape[-2]


def _collect(prefix: str, value: Any, out: list[TensorMeta], depth: int = 0) -> None:
    """Tensors inside a tensor / tuple / list / dict (two levels deep), named like ``conv_states[0]``."""
    if is_tensor(value):
        out.append(tensor_meta(prefix, value))
    elif depth < 2 and sequence_items(value) is not None:
        for i, item in enumerate(sequence_items(value)):
            _collect(f"{prefix}[{i}]", item, out, depth + 1)
    elif depth < 2 and is_a(value, dict):
        for key, item in dict.items(value):
            _collect(f"{prefix}[{_key_text(key)}]", item, out, depth + 1)


def _key_text(key: Any) -> str:
    """A dict key as text without running a user's ``__repr__`` (an unknown key shows its type)."""
    return repr(key) if type(key) in (str, int, bool, float, type(None)) else f"<{type(key).__name__}>"


def _attributes(layer: Any) -> dict[str, Any]:
    """The instance attributes (its ``__dict__``, and the ``__slots__`` of a slotted class), read in C."""
    attrs = dict(instance_dict(layer))
    for klass in type(layer).__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for name in (slots,) if is_a(slots, str) else (sequence_items(slots) or ()):
            value = stored(layer, name) if is_a(name, str) else MISSING
            if value is not MISSING:
                attrs.setdefault(name, value)
    return attrs


def inspect_layer(layer: Any, index: int, *, part: str = "", sliding_hint: bool | None = None) -> LayerReport:
    """Usage: ``inspect_layer(cache.layers[i], i)``; duck-typed over transformers' cache layer classes."""
    notes: list[str] = []
    cls = type(layer).__name__
    attrs = _attributes(layer)
    keys, values = attrs.get("keys"), attrs.get("values")
    kmeta = tensor_meta("keys", keys) if is_tensor(keys) else None
    vmeta = tensor_meta("values", values) if is_tensor(values) else None

    states: list[TensorMeta] = []
    state_attrs = [a for a in _STATE_ATTRS if a in attrs]
    for name in state_attrs:
        _collect(name, attrs[name], states)
    quant: list[TensorMeta] = []
    is_quantized = any(a in attrs for a in _QUANT_ATTRS)
    for name in _QUANT_ATTRS:
        _collect(name, attrs.get(name), quant)
    extras: list[TensorMeta] = list(quant)
    for name, value in attrs.items():
        if name not in _HANDLED:
            _collect(name, value, extras)

    home = attrs.get("device")
    home = home if type(home) is str or (type(home).__name__ == "device" and is_library_type(home)) else None
    home_device = None
    if kmeta is not None and home is not None and str(home) != kmeta.device and kmeta.shape not in ((0,),):
        home_device = str(home)

    window = attrs.get("sliding_window")
    window = window if type(window) is int else None
    is_sliding = attrs.get("is_sliding", _get(layer, "is_sliding", False)) is True or window is not None
    if sliding_hint is not None and not is_sliding:
        is_sliding = sliding_hint
    max_len = attrs.get("max_cache_len")
    static = type(max_len) is int

    has_kv_slot = "keys" in attrs or "values" in attrs
    if not state_attrs and keys is None and values is None and not is_quantized:
        initialized = attrs.get("is_initialized", False) is True
        if initialized or not type_defines(layer, "get_seq_length"):
            return LayerReport(index, "dummy", cls, part, initialized=True, extras=tuple(extras),
                               notes=("holds no cache (shared-KV or attention-free layer)",) + tuple(notes))

    if static:
        base = "static-sliding" if is_sliding else "static"
        if is_sliding and window is None:
            window = max_len  # the effective window: min(sliding_window, max_cache_len)
    elif is_quantized:
        base = "quantized"
    else:
        base = "sliding" if is_sliding else "full"
    if state_attrs and has_kv_slot:  # hybrid layers carry both (the keys maybe still None)
        kind = f"linear+{base}"
    elif state_attrs:
        kind = "linear"
    else:
        kind = base

    filled = seen = capacity = quantized = residual_cap = None
    initialized = kmeta is not None or any(m.shape for m in states)
    if kind != "linear" and kmeta is not None:
        length = _seq_len(kmeta)
        if static:
            capacity = length
            seen = read_length(attrs.get("cumulative_length_int"), notes)
            if seen is None:
                seen = read_length(attrs.get("cumulative_length"), notes)
            if seen is None and "cumulative_length" not in attrs and type_defines(layer, "get_seq_length"):
                seen = _call_length(layer, notes)
            filled = None if seen is None or capacity is None else min(seen, capacity)
        elif is_quantized:
            filled = length  # the residual, kept in full precision
            seen = read_length(attrs.get("cumulative_length"), notes)
            quantized = None if seen is None or filled is None else seen - filled
            residual_cap = attrs.get("residual_length") if type(attrs.get("residual_length")) is int else None
        else:
            filled = length
            seen = read_length(attrs.get("cumulative_length"), notes)
            if seen is None:
                seen = filled
    elif kind != "linear" and static:
        capacity = max_len
    if not initialized and kind != "dummy":
        notes.append("not initialised yet (allocated on first update)")
    return LayerReport(
        index, kind, cls, part, kmeta, vmeta, filled, seen, capacity, window, quantized, residual_cap,
        tuple(states), tuple(extras), home_device, initialized, tuple(notes),
    )


def _call_length(layer: Any, notes: list[str]) -> int | None:
    """``layer.get_seq_length()`` when transformers defines it (a user's method is never called)."""
    method = library_method(layer, "get_seq_length")
    if method is None:
        notes.append("tokens seen unknown (get_seq_length is not transformers' own: not called)")
        return None
    try:
        return read_length(method(), notes)
    except Exception as exc:  # an unknown layer class's method
        notes.append(f"get_seq_length() raised {type(exc).__name__}: {exc}")
        return None


def empty_layer(index: int, class_name: str, part: str = "", note: str = "") -> LayerReport:
    """Usage: ``empty_layer(3, "Tensor")``; a slot with nothing in it yet."""
    notes = (note,) if note else ("not initialised yet",)
    return LayerReport(index, "full", class_name, part, initialized=False, notes=notes)


def tuple_layer(entry: Any, index: int, *, part: str = "", static_capacity: bool = False) -> LayerReport:
    """Usage: ``tuple_layer((k, v), 0)``; a legacy / plain-PyTorch layer entry.

    ``(k, v)`` with matching 4-D shapes is read as (batch, heads, seq, head_dim); a third tensor (the legacy
    sliding-window scalar) is kept as an extra; anything else is listed, its length left unknown.
    With ``static_capacity`` the tensor length is reported as a capacity and the fill as unknown.
    """
    items = sequence_items(entry)
    items = [entry] if items is None else items
    if not items or all(x is None for x in items):
        return empty_layer(index, type(entry).__name__, part)
    k = items[0] if len(items) > 0 else None
    v = items[1] if len(items) > 1 else None
    if not (is_tensor(k) and is_tensor(v)):
        extras: list[TensorMeta] = []
        _collect("entry", entry, extras)
        return LayerReport(index, "unknown", type(entry).__name__, part, extras=tuple(extras),
                           notes=("not a (keys, values) pair",))
    kmeta, vmeta = tensor_meta("keys", k), tensor_meta("values", v)
    if kmeta.shape in ((0,),) and vmeta.shape in ((0,),):
        return empty_layer(index, type(entry).__name__, part, "empty tensors: layer not filled yet")
    extras = []
    for i, extra in enumerate(items[2:], start=2):
        _collect(f"entry[{i}]", extra, extras)
    notes: list[str] = []
    sliding = len(items) == 3 and len(extras) == 1 and extras[0].shape == ()
    if sliding:
        notes.append("sliding layer in transformers' legacy form: window size (a 0-d tensor) not read, "
                     "tokens seen unknown")
    filled = capacity = None
    if len(kmeta.shape) == 4 and kmeta.shape[:-1] == vmeta.shape[:-1]:
        if static_capacity:
            capacity = kmeta.shape[-2]
            notes.append("preallocated: fill is not tracked without reading key values")
        else:
            filled = kmeta.shape[-2]
    else:
        notes.append(f"layout {kmeta.shape} / {vmeta.shape} is not (batch, heads, seq, head_dim): length not inferred")
    kind = "static" if static_capacity else "sliding" if sliding else "full"
    return LayerReport(index, kind, "tuple", part, kmeta, vmeta, filled, None if sliding else filled, capacity,
                       extras=tuple(extras), notes=tuple(notes))
