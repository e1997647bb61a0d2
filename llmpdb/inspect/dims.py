"""Name tensor dimensions: by role first (where the tensor sits, what it is called), by size last.

Usage::

    namer = DimNamer.from_frame(frame.f_locals, frame=frame)   # None when no size is in reach
    namer.name_dims((1, 2, 4, 12), path="cache.layers[0].keys")  # ['batch', 'kv_heads', 'seq', 'head_dim']
    namer.describe((1, 7, 64))                                  # 'batch · seq · hidden'

Sizes come from a config (Llama, GPT-2, T5, Mixtral spellings: ``hidden_size|n_embd|d_model``,
``num_attention_heads|n_head|num_heads``, ``num_key_value_heads``, ``head_dim|d_kv`` or hidden/heads,
``vocab_size``, ``intermediate_size|n_inner|d_ff``, ``num_local_experts|num_experts``,
``num_experts_per_tok``; MLA's ``kv_lora_rank``, ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim``
and their sum ``qk_head_dim``, which replace ``head_dim``; Mamba's ``conv_kernel``, ``ssm_state`` and
``ssm_inner`` = expand × hidden, named by role only) — the frame's own (``self.config``, ``config``, ``model``) or, when it has none
(``GPT2MLP.forward``), the config of the nearest enclosing module frame; from the running module (a fused
``qkv_proj``/``c_attn`` gives ``qkv``; a module without a config gives its ``num_heads``/``head_dim``);
and from the inputs: ``batch`` and ``seq`` from ``input_ids``, ``inputs_embeds``, ``hidden_states``
(whose last dimension is ``hidden``), ``labels`` or ``attention_mask`` in this frame or, failing those,
in the enclosing frames, or an ``input_ids`` entry of a dict-like local such as a ``BatchEncoding``;
``seq`` alone from ``position_ids``/``cache_position``. ``tokens`` is batch × seq (flattened rows).

A tensor whose path tells its role (``inspect.dims_roles``: inside a KV cache, ``logits``,
``attn_weights``, ``query_states``, ``router_logits``...) is named by position in that role's layout.
Otherwise, by size, and only where exactly one name has that size: a size shared by two names, or by
none, prints ``?``. The position still rules: ``batch``/``tokens`` only ever name the leading dimension
of a batched tensor of rank ≥ 2, and that dimension gets no other name (``?`` when it is neither).
A dimension of size 1 prints ``1`` (a broadcast as often as a real one) unless the batch is 1 there or a
role layout puts a sequence axis there. Parameters (``batched=False``) have no batch dimension.
``kv_heads`` is only used when it differs from ``heads``; ``q_dim``/``kv_dim`` (heads × head_dim) only
when they differ from ``hidden``. The layer count and ``top_k`` never name a dimension by size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .config import config_candidates, describe_candidates, describe_config, looks_like_config, text_config
from .dims_roles import module_sizes, names_by_role, param_role_of, role_of
from .frames import frame_locals, frame_self
from .kinds import is_module, library_attr, static_attr, stored
from .safe import is_tensor, no_torch_function

__all__ = ["DimNamer", "config_sizes", "agreed_sizes", "frame_batch_seq"]

_SPELLINGS: dict[str, tuple[str, ...]] = {
    "hidden": ("hidden_size", "n_embd", "d_model", "n_embed", "dim"),
    "heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "kv_heads": ("num_key_value_heads", "n_kv_heads", "num_kv_heads", "n_head_kv"),
    "head_dim": ("head_dim", "d_kv", "kv_channels", "attention_head_size"),
    "vocab": ("vocab_size", "n_vocab", "padded_vocab_size"),
    "intermediate": ("intermediate_size", "n_inner", "d_ff", "ffn_dim", "ffn_hidden_size"),
    "layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "experts": ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"),
    "top_k": ("num_experts_per_tok", "moe_topk"),
    "conv_kernel": ("conv_kernel", "mamba_d_conv", "d_conv", "conv_kernel_size"),
    "ssm_state": ("state_size", "mamba_d_state", "d_state", "ssm_state_size"),
}
# Named by role only: small numbers that collide with everything, and the state-space sizes (a Mamba layer's
# conv kernel is 4 like a tiny model's heads; its inner width is often the MLP's).
_NOT_BY_SIZE = ("top_k", "conv_kernel", "ssm_state", "ssm_inner")
_ACTIVATION = ("seq", "q_seq", "k_seq", "tokens")  # sizes of the frame's activations: never a parameter's
_INDEX_DIMS = ("batch", "seq", "q_seq", "k_seq", "tokens")  # an int tensor's dims, named by size
_LEADING = ("batch", "tokens")     # the only names of a batched tensor's leading dimension
_MLA = ("qk_head_dim", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "kv_lora_rank", "q_lora_rank")
_ORDER = ("batch", "seq", "tokens", "hidden", "heads", "kv_heads", "head_dim", *_MLA, "q_dim", "kv_dim", "qkv",
          "intermediate", "vocab", "experts", "top_k", "ssm_inner", "conv_kernel", "ssm_state")
_MAX_OUTER = 40                    # enclosing frames searched for a config and the inputs


def _first_int(config: Any, names: Sequence[str]) -> int | None:
    for name in names:
        value = library_attr(config, name, None)  # as stored, or a transformers property: no user code
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
        if library_attr(config, "n_inner", 0) is None:  # GPT-2: n_inner=None means 4 * n_embd
            sizes["intermediate"] = 4 * hidden
    if sizes["kv_heads"] is not None and sizes["kv_heads"] == heads:
        sizes["kv_heads"] = None
    _mla_sizes(config, sizes)
    expand = _first_int(config, ("expand", "mamba_expand"))
    if expand and hidden and (sizes["conv_kernel"] or sizes["ssm_state"]):  # a state-space (Mamba) mixer
        sizes["ssm_inner"] = expand * hidden
    head_dim = sizes["head_dim"]
    if hidden and heads and head_dim and heads * head_dim != hidden:
        sizes["q_dim"] = heads * head_dim
    if hidden and sizes["kv_heads"] and head_dim and sizes["kv_heads"] * head_dim != hidden:
        sizes["kv_dim"] = sizes["kv_heads"] * head_dim
    return {key: value for key, value in sizes.items() if value is not None}


def _mla_sizes(config: Any, sizes: dict[str, int | None]) -> None:
    """Multi-head latent attention (DeepSeek-V2/V3): queries and keys are ``qk_nope_head_dim +
    qk_rope_head_dim`` wide, values ``v_head_dim``, the cache holds the ``kv_lora_rank`` latent and the rotary
    key. The config's ``head_dim`` is the rotary width there: it names no head, so it goes."""
    mla = {name: _first_int(config, (name,)) for name in _MLA[1:]}
    if not (mla["kv_lora_rank"] and mla["qk_rope_head_dim"]):
        return
    sizes["head_dim"] = None
    if mla["qk_nope_head_dim"]:
        sizes["qk_head_dim"] = mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]
    sizes.update(mla)


def agreed_sizes(configs: Sequence[Any]) -> tuple[dict[str, int], frozenset[int], str]:
    """Usage: ``agreed_sizes([teacher.config, student.config])`` -> ``({"vocab": 256, "head_dim": 16},
    frozenset({32, 64, ...}), "kv_heads")``: the names every config gives the same size; the sizes some
    config gives another name (a tensor of that size may be either model's: ``?``); and ``kv_heads`` when
    some config has key/value heads apart from its query heads (a cache's head dimension is theirs)."""
    each = [config_sizes(config) for config in configs]
    agreed = {name: size for name, size in each[0].items() if all(other.get(name) == size for other in each[1:])}
    ambiguous = frozenset(size for sizes in each for name, size in sizes.items() if agreed.get(name) != size)
    kv_name = "kv_heads" if any("kv_heads" in sizes for sizes in each) and "kv_heads" not in agreed else ""
    return agreed, ambiguous, kv_name


def _shape(value: Any) -> tuple[int, ...] | None:
    if not is_tensor(value):
        return None
    try:
        with no_torch_function():
            return tuple(int(s) for s in value.shape)
    except Exception:  # nested/symbolic shapes say nothing reliable about batch and seq
        return None


def _dict_entries(locals: Mapping[str, Any], key: str) -> list[tuple[str, Any]]:
    """``name['key']`` for every dict-like local (dict, UserDict such as BatchEncoding) holding ``key``."""
    found = []
    for name, value in list(locals.items()):
        data = value if issubclass(type(value), dict) else None
        if data is None and issubclass(type(value), Mapping):
            data = stored(value, "data", None)  # UserDict / BatchEncoding keep theirs in .data
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


def _outer_frames(frame: Any) -> list[Any]:
    frames = []
    outer = getattr(frame, "f_back", None) if frame is not None else None
    while outer is not None and len(frames) < _MAX_OUTER:
        frames.append(outer)
        outer = outer.f_back
    return frames


def _where(frame: Any) -> str:
    code = frame.f_code
    return getattr(code, "co_qualname", code.co_name)


def _enclosing_config(frames: Sequence[Any]) -> tuple[Any, str] | None:
    """The config of the nearest enclosing module frame (its ``self.config`` as stored, no property runs)."""
    for frame in frames:
        module = frame_self(frame)
        if is_module(module):
            config = static_attr(module, "config", None)
            if config is not None and looks_like_config(config):
                return config, f"self.config of {_where(frame)}"
    return None


def _frame_module(locals: Mapping[str, Any]) -> Any:
    module = locals.get("self") if "self" in locals else None
    return module if is_module(module) else None


@dataclass(frozen=True)
class DimNamer:
    """Known dimension sizes, in display order; ``source`` says where they came from."""

    sizes: tuple[tuple[str, int], ...]
    source: str = ""
    layers: int | None = None
    ambiguous: frozenset[int] = frozenset()  # sizes some candidate config gives a name not in ``sizes``
    kv_name: str = ""  # the name of a cache's head dimension when the sizes cannot tell ("kv_heads")

    @classmethod
    def from_config(cls, config: Any, *, batch: int | None = None, seq: int | None = None,
                    source: str = "", module: dict[str, int] | None = None,
                    agreed: tuple[dict[str, int], frozenset[int], str] | None = None) -> "DimNamer":
        """Usage: ``DimNamer.from_config(model.config, batch=1, seq=7)``; ``module``: ``module_sizes(m)``,
        which fill in what the config does not say (a fused ``qkv`` width, a plain block's heads)."""
        known = dict(config_sizes(config)) if config is not None else dict(agreed[0]) if agreed else {}
        for key, value in (module or {}).items():
            known.setdefault(key, value)
        if known.get("kv_heads") is not None and known.get("kv_heads") == known.get("heads"):
            del known["kv_heads"]
        if batch is not None:
            known["batch"] = batch
        if seq is not None:
            known["seq"] = seq
        if batch is not None and seq is not None and seq > 1:  # seq 1: tokens would read as batch
            known["tokens"] = batch * seq
        layers = known.pop("layers", None)
        ordered = tuple((name, known[name]) for name in _ORDER if name in known)
        extra = tuple((k, v) for k, v in known.items() if k not in _ORDER)
        if agreed:
            return cls(ordered + extra, source, layers, agreed[1], agreed[2])
        return cls(ordered + extra, source, layers)

    @classmethod
    def from_frame(cls, locals: Mapping[str, Any], frame: Any = None) -> "DimNamer | None":
        """Usage: ``DimNamer.from_frame(frame.f_locals, frame=frame)``; None when nothing gives a size.

        With ``frame``, its enclosing frames are searched too: for a config when this frame has none, and
        for the batch and sequence length when this frame's locals do not give both."""
        outer = _outer_frames(frame)
        candidates = config_candidates(locals)
        found = candidates[0] if len(candidates) == 1 else None if candidates else _enclosing_config(outer)
        config = found[0] if found else None
        module = module_sizes(_frame_module(locals))
        agreed = agreed_sizes([c for c, _ in candidates]) if len(candidates) > 1 else None
        hidden = (config_sizes(config) if config is not None else agreed[0] if agreed else module).get("hidden")
        bs = frame_batch_seq(locals, hidden)
        if bs is None or bs[0] is None:
            for other in outer:
                more = frame_batch_seq(frame_locals(other), hidden)
                if more is not None and more[0] is not None:
                    bs = (more[0], more[1], f"{more[2]} of {_where(other)}")
                    break
        if config is None and bs is None and not module and len(candidates) < 2:
            return None
        parts = [describe_config(*found)] if found else [describe_candidates(candidates)] if candidates else []
        if module and config is None:
            parts.append(f"self ({type(_frame_module(locals)).__name__})")
        if bs is not None:
            parts.append(f"{'seq' if bs[0] is None else 'batch/seq'} from {bs[2]}")
        return cls.from_config(config, batch=bs[0] if bs else None, seq=bs[1] if bs else None,
                               source=", ".join(parts), module=module, agreed=agreed)

    def size_of(self, name: str) -> int | None:
        """Usage: ``namer.size_of("heads")`` -> ``4`` or None."""
        return dict(self.sizes).get(name)

    def _by_size(self, shape: Sequence[int | str], batched: bool, index: bool = False) -> list[str]:
        names = []
        for i, size in enumerate(shape):
            leading = batched and i == 0 and len(shape) >= 2
            if not isinstance(size, int):
                names.append("?")
            elif size == 1:
                names.append("batch" if leading and self.size_of("batch") == 1 else "1")
            else:
                fits = [n for n, s in self.sizes if s == size and n not in _NOT_BY_SIZE
                        and (n in _LEADING) == leading]
                blocked = size in self.ambiguous and not leading
                if len(fits) == 1 and not blocked:
                    # an int tensor holds no model width; a weight has no seq: either is a collision, `?`
                    blocked = (index and fits[0] not in _INDEX_DIMS) or (not batched and fits[0] in _ACTIVATION)
                names.append(fits[0] if len(fits) == 1 and not blocked else "?")
        return names

    def name_dims(self, shape: Sequence[int | str], *, batched: bool = True, path: str = "",
                  index: bool = False) -> list[str] | None:
        """Usage: ``namer.name_dims((1, 2, 7, 16), path="k")`` -> ``['batch', 'kv_heads', 'seq', 'head_dim']``.

        ``path`` (the tensor's access path) gives its role when it says one (``dims_roles.role_of``); a
        role's layout names each dimension by its position. Without a role (or when no layout fits),
        dimensions are named by size, where exactly one name fits. ``batched=False`` for tensors that
        never carry a batch dimension (parameters): none of theirs is named ``seq`` or ``tokens``.
        ``index=True`` for a batched int32/int64 tensor (ids, positions, indices): named by size, its
        dimensions are only ever ``batch``, ``seq`` or ``tokens``, never a model width
        (``ids`` (2, 4) is not ``? · heads`` when 4 is also the head count). None when no dimension gets a
        name.
        """
        role = ((role_of(path) if batched else None) or param_role_of(path)) if path else None
        names = names_by_role(role, shape, dict(self.sizes), kv_name=self.kv_name) if role else None
        if names is None:
            names = self._by_size(shape, batched, index and batched)
        if all(n in ("?", "1") for n in names):
            return None
        return names

    def describe(self, shape: Sequence[int | str], *, batched: bool = True, path: str = "",
                 index: bool = False) -> str:
        """Usage: ``namer.describe((1, 7, 64))`` -> ``'batch · seq · hidden'``; ``''`` when nothing is known."""
        names = self.name_dims(shape, batched=batched, path=path, index=index)
        return " · ".join(names) if names else ""
