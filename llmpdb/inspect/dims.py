"""Name tensor dimensions from a model config and the frame's inputs.

Usage::

    namer = DimNamer.from_frame(frame.f_locals)      # None when neither a config nor inputs are in reach
    namer.name_dims((1, 4, 7, 16))                   # ['batch', 'heads', 'seq', 'head_dim']
    namer.describe((1, 2, 7, 16))                    # 'batch · kv_heads · seq · head_dim'

Sizes come from a config (Llama, GPT-2 and T5 spellings: ``hidden_size|n_embd|d_model``,
``num_attention_heads|n_head|num_heads``, ``num_key_value_heads``, ``head_dim|d_kv`` or hidden/heads,
``vocab_size``, ``intermediate_size|n_inner|d_ff``) and from the frame: ``batch`` and ``seq`` from an
``input_ids``, ``inputs_embeds``, ``hidden_states`` (whose last dimension is ``hidden``), ``labels`` or
``attention_mask`` local, or an ``input_ids`` entry of a dict-like local such as a ``BatchEncoding``;
failing those, ``seq`` alone from ``position_ids``/``cache_position`` (also inside a ``kwargs`` dict).

Naming is by size only, so it stays honest: a size shared by two names prints both (``seq|head_dim``), a
size nobody has prints ``?``. A dimension of size 1 is a broadcast or squeezed dimension as often as a
real one, so it prints ``1`` — except the leading dimension of a tensor of rank ≥ 2 when ``batch`` is 1.
Batch-first is the transformers convention, so ``batch`` is only ever a candidate for the leading
dimension of a tensor of rank ≥ 2 (elsewhere that size gets its other names, or ``?``), and with no
batch size in reach that leading dimension prints ``?`` rather than another name of the same size.
Parameters (``batched=False``) have no batch dimension at all. ``kv_heads`` is only used when it
differs from ``heads``; ``q_dim``/``kv_dim`` (heads × head_dim) only when they differ from ``hidden``.
The layer count is kept (``DimNamer.layers``) but never names a
dimension: it collides with small head counts and is rarely a tensor dimension.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .config import describe_config, locate_config, text_config
from .safe import is_tensor, safe_getattr

__all__ = ["DimNamer", "config_sizes", "frame_batch_seq"]

_SPELLINGS: dict[str, tuple[str, ...]] = {
    "hidden": ("hidden_size", "n_embd", "d_model", "n_embed", "dim"),
    "heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "kv_heads": ("num_key_value_heads", "n_kv_heads", "num_kv_heads", "n_head_kv"),
    "head_dim": ("head_dim", "d_kv", "kv_channels", "attention_head_size"),
    "vocab": ("vocab_size", "n_vocab", "padded_vocab_size"),
    "intermediate": ("intermediate_size", "n_inner", "d_ff", "ffn_dim", "ffn_hidden_size"),
    "layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
}
_NOT_NAMES = ("layers",)
_ORDER = ("batch", "seq", "hidden", "heads", "kv_heads", "head_dim", "q_dim", "kv_dim", "intermediate", "vocab")


def _first_int(config: Any, names: Sequence[str]) -> int | None:
    for name in names:
        value = safe_getattr(config, name)
        if type(value) is int and value > 0:
            return value
    return None


def config_sizes(config: Any) -> dict[str, int]:
    """Usage: ``config_sizes(cfg)`` -> ``{"hidden": 64, "heads": 4, "kv_heads": 2, "head_dim": 16, ...}``."""
    config = text_config(config)
    sizes = {key: _first_int(config, names) for key, names in _SPELLINGS.items()}
    hidden, heads = sizes["hidden"], sizes["heads"]
    if sizes["head_dim"] is None and hidden and heads and hidden % heads == 0:
        sizes["head_dim"] = hidden // heads
    if sizes["intermediate"] is None and hidden and sizes["hidden"] == _first_int(config, ("n_embd",)):
        if safe_getattr(config, "n_inner", 0) is None:  # GPT-2: n_inner=None means 4 * n_embd
            sizes["intermediate"] = 4 * hidden
    if sizes["kv_heads"] is not None and sizes["kv_heads"] == heads:
        sizes["kv_heads"] = None
    head_dim = sizes["head_dim"]
    if heads and head_dim and heads * head_dim != hidden:
        sizes["q_dim"] = heads * head_dim
    if sizes["kv_heads"] and head_dim and sizes["kv_heads"] * head_dim != hidden:
        sizes["kv_dim"] = sizes["kv_heads"] * head_dim
    return {key: value for key, value in sizes.items() if value is not None}


def _shape(value: Any) -> tuple[int, ...] | None:
    if not is_tensor(value):
        return None
    try:
        return tuple(int(s) for s in value.shape)
    except Exception:  # nested/symbolic shapes say nothing reliable about batch and seq
        return None


def _dict_entries(locals: Mapping[str, Any], key: str) -> list[tuple[str, Any]]:
    """``name['key']`` for every dict-like local (dict, UserDict such as BatchEncoding) holding ``key``."""
    found = []
    for name, value in list(locals.items()):
        data = value if issubclass(type(value), dict) else None
        if data is None and issubclass(type(value), Mapping):
            data = safe_getattr(value, "data")  # UserDict / BatchEncoding
        if issubclass(type(data), dict) and dict.get(data, key) is not None:
            found.append((f"{name}[{key!r}]", dict.get(data, key)))
    return found


def frame_batch_seq(locals: Mapping[str, Any], hidden: int | None = None) -> tuple[int | None, int, str] | None:
    """Usage: ``frame_batch_seq(frame.f_locals, hidden=64)`` -> ``(1, 7, "input_ids")`` or None.

    Falls back to the sequence length alone (batch None) from ``position_ids`` (last dimension; its batch
    dimension may be broadcast) or ``cache_position``, also found inside a ``kwargs`` dict.
    """
    candidates = [(n, locals[n]) for n in ("input_ids", "inputs_embeds", "hidden_states", "labels",
                                           "attention_mask") if n in locals]
    for name, value in candidates + _dict_entries(locals, "input_ids"):
        shape = _shape(value)
        if shape is None:
            continue
        if name in ("inputs_embeds", "hidden_states"):
            if len(shape) == 3 and (hidden is None or shape[2] == hidden):
                return shape[0], shape[1], name
        elif len(shape) == 2:
            return shape[0], shape[1], name
    for key in ("position_ids", "cache_position"):
        for name, value in ([(key, locals[key])] if key in locals else []) + _dict_entries(locals, key):
            shape = _shape(value)
            if shape is not None and len(shape) == (2 if key == "position_ids" else 1):
                return None, shape[-1], name
    return None


@dataclass(frozen=True)
class DimNamer:
    """Known dimension sizes, in display order; ``source`` says where they came from."""

    sizes: tuple[tuple[str, int], ...]
    source: str = ""
    layers: int | None = None

    @classmethod
    def from_config(cls, config: Any, *, batch: int | None = None, seq: int | None = None,
                    source: str = "") -> "DimNamer":
        """Usage: ``DimNamer.from_config(model.config, batch=1, seq=7)``."""
        known = dict(config_sizes(config)) if config is not None else {}
        if batch is not None:
            known["batch"] = batch
        if seq is not None:
            known["seq"] = seq
        ordered = tuple((name, known[name]) for name in _ORDER if name in known)
        extra = tuple((k, v) for k, v in known.items() if k not in _ORDER and k not in _NOT_NAMES)
        return cls(ordered + extra, source, known.get("layers"))

    @classmethod
    def from_frame(cls, locals: Mapping[str, Any]) -> "DimNamer | None":
        """Usage: ``DimNamer.from_frame(frame.f_locals)``; None when nothing in the frame gives a size."""
        found = locate_config(locals)
        config = found[0] if found else None
        hidden = config_sizes(config).get("hidden") if config is not None else None
        bs = frame_batch_seq(locals, hidden)
        if config is None and bs is None:
            return None
        parts = [describe_config(*found)] if found else []
        if bs is not None:
            parts.append(f"{'seq' if bs[0] is None else 'batch/seq'} from {bs[2]}")
        return cls.from_config(config, batch=bs[0] if bs else None, seq=bs[1] if bs else None,
                               source=", ".join(parts))

    def size_of(self, name: str) -> int | None:
        """Usage: ``namer.size_of("heads")`` -> ``4`` or None."""
        return dict(self.sizes).get(name)

    def name_dims(self, shape: Sequence[int | str], *, batched: bool = True) -> list[str] | None:
        """Usage: ``namer.name_dims((1, 2, 7, 16))`` -> ``['batch', 'kv_heads', 'seq', 'head_dim']``.

        ``batched=False`` for tensors that never carry a batch dimension (parameters). For a batched
        tensor of rank ≥ 2 the leading dimension is the batch: when its size is unknown, that dimension
        prints ``?`` rather than another name of the same size. None when no dimension gets a name.
        """
        by_size: dict[int, list[str]] = {}
        for name, size in self.sizes:
            by_size.setdefault(size, []).append(name)
        batch = self.size_of("batch")
        names = []
        for i, size in enumerate(shape):
            leading = batched and i == 0 and len(shape) >= 2
            if not isinstance(size, int):
                names.append("?")
            elif size == 1:
                names.append("batch" if leading and batch == 1 else "1")
            elif leading and batch is None:
                names.append("?")
            else:  # batch-first: "batch" is only a candidate for the leading dimension
                found = [n for n in by_size.get(size, ()) if n != "batch" or leading]
                names.append("|".join(found) or "?")
        if all(n in ("?", "1") for n in names):
            return None
        return names

    def describe(self, shape: Sequence[int | str], *, batched: bool = True) -> str:
        """Usage: ``namer.describe((1, 7, 64))`` -> ``'batch · seq · hidden'``; ``''`` when nothing is known."""
        names = self.name_dims(shape, batched=batched)
        return " · ".join(names) if names else ""
