"""KV caches: find one in a frame, describe it (any transformers cache class, legacy lists, ``(k, v)`` tuples).

Usage::

    path, cache = find_cache(frame.f_locals)              # or None (finding: ``kv_find``, re-exported here)
    report = inspect_cache(cache, config=model.config)    # CacheReport: summary + one LayerReport per layer
    entry = history_entry(report, stop=3, cache_id=1)     # what `kv --history` keeps (no tensors)

No tensor data is read, except the one length scalar of a static layer (``cumulative_length``); meta tensors
work. Layouts understood, newest first: ``cache.layers`` (transformers 5.x: Dynamic/Static/sliding/quantized/
linear-attention/hybrid/dummy layers), ``self_attention_cache`` + ``cross_attention_cache``
(EncoderDecoderCache), ``key_cache``/``value_cache`` lists (4.4x-4.5x), ``conv_states``/``ssm_states`` lists
(4.x MambaCache) and tuples of ``(k, v)`` (older transformers, plain PyTorch models).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..units import human_bytes, plural
from .kv_layers import LayerReport, inspect_layer, tensor_meta, tuple_layer
from .config import text_config
from .kinds import is_a, sequence_items as _seq
from .kv_find import (SEARCHED, cache_attr as _get, find_cache, find_enclosing_cache, is_kv_pair,
                      looks_like_cache, unwrap_cache)
from .safe import is_tensor

__all__ = [
    "CacheReport",
    "LayerReport",
    "KvHistoryEntry",
    "history_entry",
    "NotACacheError",
    "SEARCHED",
    "inspect_cache",
    "index_ranges",
    "find_cache",
    "find_enclosing_cache",
    "looks_like_cache",
    "is_kv_pair",
    "unwrap_cache",
    "head_sharing",
]


class NotACacheError(ValueError):
    """The object is not a KV cache in any layout this module understands."""


@dataclass(frozen=True)
class CacheReport:
    """A whole cache: the summary numbers (of the self-attention part) and every layer, parts in order."""

    class_name: str
    layout: str
    layers: tuple[LayerReport, ...]
    parts: tuple[str, ...] = ("",)
    seq: int | None = None
    capacity: int | None = None
    kv_heads: int | None = None
    q_heads: int | None = None
    head_dim: int | None = None
    v_head_dim: int | None = None
    batch: int | None = None
    dtype: str | None = None
    device: str | None = None
    nbytes: int = 0
    formula_bytes: int | None = None
    formula: str = ""
    differences: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    latent: tuple[int, int] | None = None  # MLA (DeepSeek): (kv_lora_rank, qk_rope_head_dim) that keys/values hold

    def part_layers(self, part: str = "") -> tuple[LayerReport, ...]:
        """Usage: ``report.part_layers("cross")``; the layers of one part (``""`` when there is one part)."""
        return tuple(layer for layer in self.layers if layer.part == part)

    @property
    def main_layers(self) -> tuple[LayerReport, ...]:
        return self.part_layers(self.parts[0])

    def layer(self, index: int, part: str | None = None) -> LayerReport | None:
        """Usage: ``report.layer(0)`` / ``report.layer(1, "cross")``; None when out of range."""
        for layer in self.part_layers(self.parts[0] if part is None else part):
            if layer.index == index:
                return layer
        return None


def head_sharing(q_heads: int | None, kv_heads: int | None) -> str:
    """Usage: ``head_sharing(32, 8)`` -> ``"GQA ×4"``; also ``MHA``, ``MQA``, or ``""`` when unknown."""
    if not q_heads or not kv_heads:
        return ""
    if q_heads == kv_heads:
        return "MHA"
    if kv_heads == 1:
        return "MQA"
    if q_heads % kv_heads == 0:
        return f"GQA ×{q_heads // kv_heads}"
    return f"{q_heads}/{kv_heads} heads: not a whole group"


def _layers_of(cache: Any, part: str) -> tuple[str, list[LayerReport], list[str]]:
    """(layout, layer reports, notes) of a cache that is not split into self/cross parts."""
    notes: list[str] = []
    entries = _seq(cache)
    if entries is not None:
        return "tuple of (k, v)", [tuple_layer(e, i, part=part) for i, e in enumerate(entries)], notes
    layers = _seq(_get(cache, "layers"))
    if layers is not None:
        hints = _seq(_get(cache, "is_sliding"))
        hints = hints if hints is not None and len(hints) == len(layers) else [None] * len(layers)
        if not layers:
            notes.append("no layers yet (created on the first forward)")
        return "layers", [inspect_layer(l, i, part=part, sliding_hint=h) for i, (l, h) in enumerate(zip(layers, hints))], notes
    keys, values = _seq(_get(cache, "key_cache")), _seq(_get(cache, "value_cache"))
    if keys is not None and values is not None:
        return "key_cache/value_cache lists", _legacy_lists(cache, keys, values, part, notes), notes
    conv, ssm = _seq(_get(cache, "conv_states")), _seq(_get(cache, "ssm_states"))
    if conv is not None and ssm is not None:
        out = []
        for i in range(max(len(conv), len(ssm))):
            states = tuple(tensor_meta(f"{name}[{i}]", seq[i]) for name, seq in (("conv_states", conv), ("ssm_states", ssm))
                           if i < len(seq) and is_tensor(seq[i]))
            out.append(LayerReport(i, "linear", type(cache).__name__, part, states=states))
        return "conv_states/ssm_states lists", out, notes
    raise NotACacheError(f"a {type(cache).__name__}: no .layers, .key_cache/.value_cache or (k, v) tuples")


def _legacy_lists(cache: Any, keys: Any, values: Any, part: str, notes: list[str]) -> list[LayerReport]:
    """transformers 4.4x-4.5x: per-layer tensors in two lists; Static/Hybrid caches preallocate them."""
    max_len = _get(cache, "max_cache_len")
    sliding = _seq(_get(cache, "is_sliding"))
    window = _get(cache, "sliding_window")
    seen = _get(cache, "_seen_tokens")
    out = []
    for i, (k, v) in enumerate(zip(keys, values)):
        static = is_a(max_len, int) and is_tensor(k) and k.dim() == 4 and k.shape[-2] in (max_len, window)
        layer = tuple_layer((k, v), i, part=part, static_capacity=static)
        if sliding is not None and i < len(sliding) and sliding[i] is True and is_a(window, int):
            layer = dataclasses.replace(layer, kind="static-sliding" if static else "sliding", window=window)
        if not static and is_a(seen, int) and layer.filled is not None:
            layer = dataclasses.replace(layer, seen=seen)
        out.append(dataclasses.replace(layer, class_name=type(cache).__name__))
    if len(keys) != len(values):
        notes.append(f"key_cache has {len(keys)} entries, value_cache {len(values)}")
    return out


def _parts(cache: Any) -> tuple[str, tuple[str, ...], list[LayerReport], list[str]]:
    self_part, cross_part = _get(cache, "self_attention_cache"), _get(cache, "cross_attention_cache")
    if self_part is not None and cross_part is not None:
        layout, self_layers, notes = _layers_of(self_part, "self")
        _, cross_layers, cross_notes = _layers_of(cross_part, "cross")
        return f"encoder-decoder ({layout})", ("self", "cross"), self_layers + cross_layers, notes + cross_notes
    entries = [_seq(e) for e in (_seq(cache) or ())]
    if entries and all(e is not None and len(e) in (4, 6) for e in entries):
        half = len(entries[0]) // 2
        layers = [tuple_layer(tuple(e[:half]), i, part="self") for i, e in enumerate(entries)]
        layers += [tuple_layer(tuple(e[half:]), i, part="cross") for i, e in enumerate(entries)]
        return "tuple of (k, v, cross k, cross v)", ("self", "cross"), layers, []
    layout, layers, notes = _layers_of(cache, "")
    return layout, ("",), layers, notes


def _single(values: list[Any]) -> Any:
    distinct = list(dict.fromkeys(v for v in values if v is not None))
    return distinct[0] if len(distinct) == 1 else None


def index_ranges(indices: list[int]) -> str:
    """Usage: ``index_ranges([0, 1, 2, 5])`` -> ``"0-2, 5"``."""
    spans: list[list[int]] = []
    for i in indices:
        if spans and i == spans[-1][1] + 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    return ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in spans)


def _ranges(indices: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"layers 0-2, 5"``."""
    return ("layer " if len(indices) == 1 else "layers ") + index_ranges(indices)


def inspect_cache(cache: Any, *, config: Any = None) -> CacheReport:
    """Usage: ``inspect_cache(outputs.cache, config=model.config)`` -> CacheReport.

    ``config`` (optional) supplies the query heads (``num_attention_heads``) for the GQA group size.
    Raises NotACacheError for an object in no layout this module understands.
    """
    layout, parts, layers, notes = _parts(cache)
    main = [l for l in layers if l.part == parts[0]]
    attn = [l for l in main if l.has_attention]
    seq = max((l.seen for l in attn if l.seen is not None), default=None)
    capacity = max((l.capacity for l in attn if l.capacity is not None), default=None)
    kv_heads = _single([l.kv_heads for l in attn])
    head_dim = _single([l.head_dim for l in attn])
    v_head_dim = _single([l.v_head_dim for l in attn])
    batch = _single([l.batch for l in attn])
    for label, getter in (("kv heads", "kv_heads"), ("head_dim", "head_dim"), ("batch", "batch")):
        seen_values = sorted({getattr(l, getter) for l in attn if getattr(l, getter) is not None})
        if len(seen_values) > 1:
            notes.append(f"{label} differ across layers: {seen_values}")
    tensors = [m for l in layers for m in l.tensors if m.shape != ()]
    kv_metas = [m for l in attn for m in (l.keys, l.values) if m is not None]
    dtypes = list(dict.fromkeys(m.dtype for m in (kv_metas or tensors)))
    devices = list(dict.fromkeys(m.device for m in tensors))
    dtype = dtypes[0] if len(dtypes) == 1 else ("mixed " + "/".join(dtypes) if dtypes else None)
    stored = list(dict.fromkeys(m.dtype for l in attn if l.kind == "quantized" for m in l.extras
                                if m.name.startswith("_quantized") and m.shape != ()))
    if stored and dtype:
        dtype += f" (stored {'/'.join(stored)})"
    device = devices[0] if len(devices) == 1 else ("mixed " + "/".join(devices) if devices else None)
    offloaded = [l.index for l in layers if l.home_device]
    if offloaded:
        homes = "/".join(dict.fromkeys(l.home_device for l in layers if l.home_device))
        notes.append(f"{_ranges(offloaded)} offloaded to {layers[offloaded[0]].keys.device} (home {homes})")
    nbytes = sum(l.nbytes for l in layers)

    q_heads = latent = None
    if config is not None:
        config = text_config(config)
        q_heads = next((v for v in (_get(config, a) for a in ("num_attention_heads", "n_head", "num_heads"))
                        if type(v) is int), None)
        cfg_kv = _get(config, "num_key_value_heads")
        rank, rope = _get(config, "kv_lora_rank"), _get(config, "qk_rope_head_dim")
        if type(rank) is int and type(rope) is int and kv_heads is not None:  # multi-head latent attention
            if kv_heads == 1 and head_dim == rank and v_head_dim == rope:
                latent = (rank, rope)
            else:
                notes.append(f"config is MLA (kv_lora_rank {rank}, qk_rope_head_dim {rope}): "
                             f"what these {kv_heads}-head tensors hold is ?")
        elif type(cfg_kv) is int and kv_heads is not None and cfg_kv != kv_heads:
            notes.append(f"config num_key_value_heads is {cfg_kv}, tensors hold {kv_heads} (sharded or repeated)")

    itemsize = _single([m.itemsize for m in kv_metas])
    formula_bytes, formula = None, ""
    if attn and None not in (seq, kv_heads, head_dim, v_head_dim, batch, itemsize):
        formula_bytes = batch * len(attn) * kv_heads * (head_dim + v_head_dim) * seq * itemsize
        n_layers = plural(len(attn), "layer")
        dims = f"2 × {n_layers}" if head_dim == v_head_dim else n_layers
        hd = f"{head_dim} head_dim" if head_dim == v_head_dim else f"({head_dim}+{v_head_dim}) head_dim"
        formula = (f"{'' if batch == 1 else f'batch {batch} × '}{dims} × {kv_heads} kv heads × {hd} × "
                   f"{seq} seq × {itemsize} B")
        if latent is not None:
            formula = (f"{'' if batch == 1 else f'batch {batch} × '}{n_layers} × ({latent[0]} latent + "
                       f"{latent[1]} rope) × {seq} seq × {itemsize} B")
    differences = _differences(layers, parts, attn, main, seq, nbytes, formula_bytes)
    return CacheReport(
        type(cache).__name__, layout, tuple(layers), parts, seq, capacity, kv_heads, q_heads, head_dim,
        v_head_dim, batch, dtype, device, nbytes, formula_bytes, formula, tuple(differences), tuple(notes),
        latent,
    )


def _differences(layers, parts, attn, main, seq, nbytes, formula_bytes) -> list[str]:
    """Why the actual bytes differ from the formula (empty when they match)."""
    if formula_bytes is None or nbytes == formula_bytes:
        return []
    out = []
    static = [l for l in attn if l.capacity is not None and l.kind in ("static", "linear+static")]  # not windows
    if static and seq is not None and any(l.capacity != seq for l in static):
        caps = sorted({l.capacity for l in static})
        out.append(f"static capacity {'/'.join(map(str, caps))} allocated for seq {seq}")
    windowed = [l for l in attn if l.window is not None]
    if windowed:
        held = sorted({(l.filled if l.capacity is None else l.capacity) for l in windowed} - {None})
        out.append(f"sliding window {'/'.join(str(w) for w in sorted({l.window for l in windowed}))} "
                   f"keeps {'/'.join(map(str, held))} of {seq} tokens ({_ranges([l.index for l in windowed])})")
    quant = [l for l in attn if l.quantized is not None]
    if quant:
        stored = "/".join(dict.fromkeys(m.dtype for m in quant[0].extras if m.name.startswith("_quantized") and m.shape != ()))
        out.append(f"{_ranges([l.index for l in quant])} quantized ({quant[0].quantized} tokens"
                   f"{f' stored as {stored}' if stored else ''}, residual {quant[0].filled}"
                   f"{f' in {quant[0].keys.dtype}' if quant[0].keys else ''})")
    linear = [l for l in main if l.kind.startswith("linear")]
    if linear:
        state_bytes = sum(m.nbytes for l in linear for m in l.states)
        verb = "holds" if len(linear) == 1 else "hold"
        out.append(f"{_ranges([l.index for l in linear])} {verb} linear-attention states ({human_bytes(state_bytes)})")
    uneven = [l for l in attn if l.kind == "full" and l.filled is not None and seq is not None and l.filled < seq]
    if uneven:
        out.append(f"{_ranges([l.index for l in uneven])} {'holds' if len(uneven) == 1 else 'hold'} fewer tokens "
                   f"({'/'.join(str(l.filled) for l in uneven)}: not yet updated in this forward?)")
    empty = [l for l in attn if not l.initialized]
    if empty:
        out.append(f"{_ranges([l.index for l in empty])} not initialised")
    if len(parts) > 1:
        cross = [l for l in layers if l.part == parts[1]]
        lengths = sorted({l.filled for l in cross if l.filled is not None})
        out.append(f"cross-attention part adds {human_bytes(sum(l.nbytes for l in cross))}"
                   + (f" (encoder length {'/'.join(map(str, lengths))})" if lengths else ""))
    extra = sum(m.nbytes for l in attn for m in l.extras if m.shape != () and not m.name.startswith("_quantized"))
    if extra:
        out.append(f"other tensors in the layers ({human_bytes(extra)})")
    return out or ["layer shapes differ from one another"]


@dataclass(frozen=True)
class KvHistoryEntry:
    """The growth-relevant metadata of a cache at one stop (kept between stops; holds no tensor)."""

    stop: int
    cache_id: int
    class_name: str
    path: str
    seq: int | None
    filled: tuple[int | None, ...]
    nbytes: int

    def same_state(self, other: "KvHistoryEntry") -> bool:
        """True when ``other`` shows the same cache object with the same fill (nothing grew)."""
        return (self.cache_id, self.seq, self.filled, self.nbytes) == (other.cache_id, other.seq, other.filled, other.nbytes)


def history_entry(report: CacheReport, *, stop: int, cache_id: int, path: str = "") -> KvHistoryEntry:
    """Usage: ``history_entry(inspect_cache(c), stop=SESSION.stop, cache_id=id(c))``; per-layer fill of the main part."""
    filled = tuple(l.filled for l in report.main_layers)
    return KvHistoryEntry(stop, cache_id, report.class_name, path, report.seq, filled, report.nbytes)
