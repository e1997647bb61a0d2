"""Name a tensor's dimensions by role: the position of each dimension in a layout its path tells.

Usage::

    role = role_of("outputs.past_key_values.layers[0].keys")          # "cache_kv"
    names_by_role(role, (1, 2, 4, 12), {"kv_heads": 2, "heads": 4, "head_dim": 12})
    # ['batch', 'kv_heads', 'seq', 'head_dim']        (4 is the window's length, not the head count)
    module_sizes(self_module)                                          # {"qkv": 96} from a fused projection

Sizes that coincide are the rule on tiny configs, so a tensor whose role is known is named by position,
never by size alone:

- **where it sits**: a tensor inside a KV cache (``….layers[i].keys``/``.values``, ``key_cache[i]``,
  ``past_key_values[i][0]``, ``layer_past[1]``, ``present[0]``...) is ``batch · kv_heads · seq · head_dim``
  (``heads`` when the config has no separate key/value head count) — ``seq`` is the cache's length, its
  capacity for a static cache, the window for a sliding one; under MLA (DeepSeek) the last dimension is
  the ``kv_lora_rank`` latent (keys) or the ``qk_rope_head_dim`` rotary key (values);
- **its name** (the last name of the path, per-layer indices ignored: ``outputs.attentions[0]``):
  ``logits`` ``batch · seq · vocab``, ``attn_weights`` ``batch · heads · q_seq · k_seq``,
  ``query_states`` ``batch · heads · seq · head_dim``, ``router_logits`` ``tokens · experts``,
  ``qkv`` ``batch · seq · qkv``, ``hidden_states`` ``batch · seq · hidden`` (or ``intermediate``), ...
  (``ROLES`` and ``NAMES`` below are the whole table).

A role lists the layouts it may have at each rank. A layout fits when every dimension whose size is known
(from the config, the module, or the frame's batch) has that size, or 1 (broadcast, printed ``1``);
``seq``/``q_seq``/``k_seq`` fit any size. A slot written as a tuple (``("hidden", "intermediate")``) takes
the one name whose size matches, ``?`` when several do. When several layouts fit and disagree on a
dimension, that dimension prints ``?``; when none fits, the caller falls back to naming by size. A model
size that nobody knows (no config, no module attribute) prints ``?`` — a classifier's ``logits`` are not
``batch · vocab`` — except inside a KV cache, whose layout the container fixes. Nothing here calls a
property or ``__getattr__``: module attributes are read as stored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .kinds import is_module, static_attr

__all__ = ["param_role_of", "ROLES", "NAMES", "role_of", "names_by_role", "module_sizes", "FREE"]

FREE = frozenset({"seq", "q_seq", "k_seq"})  # sequence axes: any length fits (decode steps, caches, windows)
_POSITIONAL = frozenset({"batch", "tokens"})  # named by position even when their size is unknown
_CERTAIN = frozenset({"cache_kv"})  # roles whose layout the container fixes: named without any size
KV = "KV"  # resolves to kv_heads when the config has a separate key/value head count, else heads
_HIDDEN = ("hidden", "intermediate")
# A head's width: head_dim, or under MLA (DeepSeek) qk_head_dim for queries and keys, v_head_dim for values.
_QD, _KD, _OD = ("head_dim", "qk_head_dim"), ("head_dim", "qk_head_dim", "v_head_dim"), ("head_dim", "v_head_dim")
_BHSD = ("batch", "heads", "seq", _QD)
_BSHD = ("batch", "seq", "heads", _QD)
_MLA_CACHE = (("batch", KV, "seq", ("kv_lora_rank", "qk_rope_head_dim")),)  # the latent and the rotary key

ROLES: dict[str, dict[int, tuple[tuple[Any, ...], ...]]] = {
    "cache_kv": {4: (("batch", KV, "seq", "head_dim"),)},
    "hf_query": {4: (_BHSD,), 3: (("batch", "seq", ("q_dim", "hidden")),)},
    "hf_key": {4: (("batch", KV, "seq", _KD), ("batch", "heads", "seq", _KD)),
               3: (("batch", "seq", ("kv_dim", "hidden")),)},
    "query": {4: (_BHSD, _BSHD), 3: (("batch", "seq", ("q_dim", "hidden")),)},
    "key": {4: (("batch", KV, "seq", _KD), ("batch", "heads", "seq", _KD), ("batch", "seq", KV, _KD),
                ("batch", "seq", "heads", _KD)),
            3: (("batch", "seq", ("kv_dim", "hidden", "q_dim")),)},
    "attn_weights": {4: (("batch", "heads", "q_seq", "k_seq"),)},
    "attn_output": {4: (("batch", "seq", "heads", _OD), ("batch", "heads", "seq", _OD)),
                    3: (("batch", "seq", ("hidden", "q_dim")),)},
    "logits": {3: (("batch", "seq", "vocab"),), 2: (("batch", "vocab"),)},
    "router": {2: (("tokens", "experts"),), 3: (("batch", "seq", "experts"),)},
    "routing": {2: (("tokens", "experts"), ("tokens", "top_k"))},
    "top_k": {2: (("tokens", "top_k"),)},
    "hidden": {3: (("batch", "seq", _HIDDEN),), 2: (("tokens", _HIDDEN), ("batch", _HIDDEN))},
    "qkv": {3: (("batch", "seq", "qkv"),)},
    "ids": {2: (("batch", "seq"),)},
    "mask": {2: (("batch", "seq"),), 4: (("batch", "heads", "q_seq", "k_seq"),)},
    "positions": {1: (("seq",),), 2: (("batch", "seq"),)},
    # state-space (Mamba) layers; "?" takes any size (Mamba-2 convolves x, B and C together: not ssm_inner)
    "conv_state": {3: (("batch", ("ssm_inner", "?"), "conv_kernel"),)},
    "ssm_state": {3: (("batch", ("ssm_inner", "?"), "ssm_state"),), 4: (("batch", "?", "?", "ssm_state"),)},
    # a parameter: the depthwise conv1d of a Mamba mixer, (channels, in-channels per group = 1, kernel)
    "conv_weight": {3: ((("ssm_inner", "?"), ("in_per_group",), "conv_kernel"),)},
}

NAMES: dict[str, str] = {
    **dict.fromkeys(("logits", "lm_logits", "next_token_logits", "next_token_scores", "shift_logits"), "logits"),
    **dict.fromkeys(("attn_weights", "attn_probs", "attention_probs", "attention_scores", "attention_weights",
                     "attn_scores", "attentions", "cross_attentions", "encoder_attentions",
                     "decoder_attentions"), "attn_weights"),
    **dict.fromkeys(("query_states",), "hf_query"),
    **dict.fromkeys(("key_states", "value_states"), "hf_key"),
    **dict.fromkeys(("q", "query", "queries", "xq"), "query"),
    **dict.fromkeys(("k", "v", "key", "value", "xk", "xv"), "key"),
    **dict.fromkeys(("attn_output", "attn_out", "attention_output"), "attn_output"),
    **dict.fromkeys(("router_logits", "router_probs", "gate_logits"), "router"),
    **dict.fromkeys(("routing_weights",), "routing"),
    **dict.fromkeys(("selected_experts", "top_k_index", "top_k_weights", "topk_idx", "topk_weight"), "top_k"),
    **dict.fromkeys(("hidden_states", "inputs_embeds", "residual", "last_hidden_state", "encoder_hidden_states",
                     "encoder_last_hidden_state", "decoder_hidden_states"), "hidden"),
    **dict.fromkeys(("qkv", "qkv_states", "fused_qkv", "mixed_qkv"), "qkv"),
    **dict.fromkeys(("input_ids", "labels", "token_type_ids", "decoder_input_ids", "shift_labels"), "ids"),
    **dict.fromkeys(("attention_mask", "causal_mask", "decoder_attention_mask", "encoder_attention_mask"),
                    "mask"),
    **dict.fromkeys(("position_ids", "cache_position"), "positions"),
    **dict.fromkeys(("conv_states", "conv_state"), "conv_state"),
    **dict.fromkeys(("recurrent_states", "recurrent_state", "ssm_states", "ssm_state"), "ssm_state"),
}

# Containers whose indexed entries are one layer's (key, value) pair (legacy tuple caches, plain models).
_CACHE_CONTAINERS = frozenset({
    "past_key_values", "past_key_value", "past", "layer_past", "present", "presents", "kv_cache", "kv_caches",
    "cache", "caches", "new_past", "next_cache", "next_decoder_cache", "pkv", "kv", "layer_cache",
})
_SEGMENT = re.compile(r"\.?([A-Za-z_]\w*)|\[([^\]]*)\]")

# Fused projections whose output size is the fused q·k·v width, and where each stores it.
_FUSED = ("qkv_proj", "query_key_value", "Wqkv", "qkv", "c_attn", "in_proj_qkv")
# A module's own integer attributes, for models without a config (pure PyTorch, nanoGPT-style blocks).
_MODULE_INTS = {
    "heads": ("num_heads", "n_head", "n_heads", "heads", "num_attention_heads"),
    "kv_heads": ("num_key_value_heads", "num_kv_heads", "n_kv_heads"),
    "head_dim": ("head_dim", "head_size", "d_head"),
    "hidden": ("hidden_size", "embed_dim", "n_embd", "d_model"),
    "experts": ("num_experts", "num_local_experts", "n_routed_experts"),
    "top_k": ("top_k", "num_experts_per_tok"),
}


def _segments(path: str) -> list[tuple[str, str]]:
    """``"outputs.cache.layers[0].keys"`` -> ``[("name", "outputs"), ("name", "cache"), ("name", "layers"),
    ("index", "0"), ("name", "keys")]``; a string key (``inputs['input_ids']``) is ``("key", "input_ids")``."""
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(path):
        match = _SEGMENT.match(path, pos)
        if match is None:
            return []  # an expression (a call, an operator): no role from its text
        name, index = match.groups()
        if name is not None:
            out.append(("name", name))
        elif len(index) >= 2 and index[0] == index[-1] and index[0] in "'\"":
            out.append(("key", index[1:-1]))
        else:
            out.append(("index", index.strip()))
        pos = match.end()
    return out


def role_of(path: str) -> str | None:
    """Usage: ``role_of("outputs.router_logits[0]")`` -> ``"router"``; None when the path tells nothing."""
    parts = _segments(path)
    while parts and parts[-1][0] == "index":
        trailing = parts.pop()
        if parts and parts[-1][0] != "index" and parts[-1][1] in ("key_cache", "value_cache"):
            return "cache_kv"
        if parts and parts[-1][0] != "index" and parts[-1][1] in _CACHE_CONTAINERS and trailing[1] in ("0", "1"):
            return "cache_kv"
    if not parts:
        return None
    kind, leaf = parts[-1]
    if kind == "name" and leaf in ("keys", "values") and len(parts) >= 2 and _in_cache_layer(parts[-2]):
        return "cache_kv"  # a cache layer's tensors (transformers 5: cache.layers[i].keys, self.keys)
    return NAMES.get(leaf)


def param_role_of(path: str) -> str | None:
    """Usage: ``param_role_of("model.backbone.layers[0].mixer.conv1d.weight")`` -> ``"conv_weight"``; a
    parameter's role from its name (``prefixed['….conv1d.weight']`` too); None for any other."""
    dotted = ".".join(text for _, text in _segments(path))
    return "conv_weight" if dotted == "conv1d.weight" or dotted.endswith(".conv1d.weight") else None


def _in_cache_layer(parent: tuple[str, str]) -> bool:
    """``layers[0]``, ``self`` (inside a layer's method), ``layer``, ``cache_layer``: a layer's attributes."""
    kind, text = parent
    return kind == "index" or (kind == "name" and (text == "self" or "layer" in text or "cache" in text))


def _slot(slot: Any, size: int | str, sizes: Mapping[str, int], certain: bool, kv_name: str = "") -> str | None:
    """The name this slot gives a dimension of ``size``; None when the size contradicts the slot.

    A model size nobody knows (no config) prints ``?``, except in a layout the container makes certain
    (a KV cache): a classifier's ``logits`` (batch, 10) is not ``batch · vocab`` for want of a vocab size."""
    if slot == "?":
        return "?"  # a dimension the layout leaves unnamed: any size fits
    if isinstance(slot, tuple):
        if not isinstance(size, int):
            return "?"  # a symbolic size: which of the names, nobody can say
        fits = [name for name in slot if sizes.get(name) == size]
        if fits:
            return fits[0] if len(fits) == 1 else "?"
        if "?" in slot:
            return "?"
        return "1" if size == 1 else ("?" if not any(name in sizes for name in slot) else None)
    name = ("kv_heads" if "kv_heads" in sizes else kv_name or "heads") if slot == KV else slot
    if name in FREE or not isinstance(size, int):
        return name
    known = sizes.get(name)
    if known is None:
        return name if certain or name in _POSITIONAL else "?"
    if known == size:
        return name
    return "1" if size == 1 else None


def names_by_role(role: str, shape: Sequence[int | str], sizes: Mapping[str, int],
                  kv_name: str = "") -> list[str] | None:
    """Usage: ``names_by_role("logits", (1, 7, 256), {"vocab": 256})`` -> ``['batch', 'seq', 'vocab']``.

    None when no layout of the role fits the shape (the caller then names by size). ``kv_name`` names the
    key/value head dimension when ``sizes`` has no ``kv_heads`` (several configs that disagree on it)."""
    fitting = []
    layouts = ROLES.get(role, {}).get(len(shape), ())
    if role == "cache_kv" and "kv_lora_rank" in sizes and len(shape) == 4:
        layouts = _MLA_CACHE
    for layout in layouts:
        names = [_slot(slot, size, sizes, role in _CERTAIN, kv_name) for slot, size in zip(layout, shape)]
        if None not in names:
            fitting.append(names)
    if not fitting:
        return None
    return [column[0] if len(set(column)) == 1 else "?" for column in zip(*fitting)]


def _stored_int(obj: Any, name: str) -> int | None:
    value = static_attr(obj, name, None)
    return value if type(value) is int and value > 0 else None


def _out_size(child: Any) -> int | None:
    """A projection's output width: ``nn.Linear.out_features`` or GPT-2's ``Conv1D.nf``, as stored."""
    return _stored_int(child, "out_features") or _stored_int(child, "nf")


def module_sizes(module: Any) -> dict[str, int]:
    """Usage: ``module_sizes(attn)`` -> ``{"qkv": 96}``, or ``{"heads": 4, "head_dim": 8}`` for a plain block.

    Read from the module's instance dict only: its integer attributes (``num_heads``, ``head_dim``...) and
    the output width of a fused q·k·v projection child (``qkv_proj``, ``c_attn``, ``query_key_value``...)."""
    if not is_module(module):
        return {}
    sizes: dict[str, int] = {}
    for key, names in _MODULE_INTS.items():
        found = next((v for v in map(lambda n: _stored_int(module, n), names) if v), None)
        if found:
            sizes[key] = found
    children = static_attr(module, "_modules", None)
    if isinstance(children, dict):
        for name in _FUSED:
            width = _out_size(dict.get(children, name))
            if width:
                sizes["qkv"] = width
                break
    return sizes
