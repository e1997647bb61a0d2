"""A model's state against a checkpoint or a second model: names, shapes, dtypes, metadata only.

Usage::

    d = statediff(model, "out/checkpoint-500")      # folder, *.index.json, .safetensors, .bin/.pt/.pth
    d = statediff(model, other_model_or_state_dict)
    d.matched, d.missing, d.unexpected, d.shape_mismatches, d.dtype_mismatches, d.tied, d.prefix
    group_names(d.missing)                          # [KeyGroup("model.layers.{0..31}.mlp.up_proj.weight", ...)]

The model side is a module (its parameters and persistent buffers, walked without calling ``state_dict()``
hooks) or a mapping of tensors. A prefix that explains the difference (``module.``, ``_orig_mod.``,
``model.``, the model's ``base_model_prefix``, ``transformer.``, or one seen in the names themselves, like
``module._orig_mod.``) is detected, reported and applied, to be stripped or added. Names
that share a tensor in the model (tied embeddings) are not missing when the checkpoint holds one of them.
No tensor data is read.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .checkpoint import CheckpointError, CheckpointInfo, TensorMeta, find_state_dict, read_checkpoint
from .kinds import is_module, static_attr

__all__ = [
    "KeyGroup",
    "Mismatch",
    "PrefixFix",
    "StateDiff",
    "diff_states",
    "group_names",
    "model_state",
    "statediff",
]

PREFIXES = ("module.", "_orig_mod.", "model.", "transformer.")


@dataclass(frozen=True)
class Mismatch:
    """One name whose shape or dtype differs: the model's metadata and the checkpoint's."""

    name: str
    model: TensorMeta
    other: TensorMeta


@dataclass(frozen=True)
class PrefixFix:
    """A renaming of the checkpoint's keys that explains the difference.

    ``steps`` like ``(("strip", "module."),)``; ``before``/``after`` model names found without/with it, out
    of ``total``.
    """

    steps: tuple[tuple[str, str], ...]
    before: int
    after: int
    total: int

    def describe(self) -> str:
        """``"strip `module.`"``; consecutive strips are joined (``"strip `module._orig_mod.`"``)."""
        parts: list[list[str]] = []
        for action, prefix in self.steps:
            if parts and parts[-1][0] == action == "strip":
                parts[-1][1] += prefix
            else:
                parts.append([action, prefix])
        return ", ".join(f"{action} `{prefix}`" for action, prefix in parts)


@dataclass
class StateDiff:
    """The difference between a model's state and a checkpoint (or a second model), metadata only."""

    model_label: str
    other_label: str
    other_kind: str
    other_files: int
    model_count: int
    other_count: int
    matched: int
    missing: list[str] = field(default_factory=list)
    unexpected: list[tuple[str, TensorMeta]] = field(default_factory=list)
    shape_mismatches: list[Mismatch] = field(default_factory=list)
    dtype_mismatches: list[Mismatch] = field(default_factory=list)
    tied: list[tuple[str, str]] = field(default_factory=list)
    prefix: PrefixFix | None = None
    nested_under: str | None = None
    notes: list[str] = field(default_factory=list)
    model_names: list[str] = field(default_factory=list, repr=False)
    other_names: list[str] = field(default_factory=list, repr=False)

    @property
    def ok(self) -> bool:
        """True when every model tensor is found with its shape and dtype and nothing is left over."""
        return not (self.missing or self.unexpected or self.shape_mismatches or self.dtype_mismatches)


@dataclass(frozen=True)
class KeyGroup:
    """Names folded into one layer pattern: ``model.layers.{0..31}.self_attn.q_proj.weight``."""

    pattern: str
    members: tuple[str, ...]


def _is_index(part: str) -> bool:
    return part.isdigit() and (len(part) == 1 or part[0] != "0")


def _format_numbers(values: Sequence[int]) -> str:
    nums = sorted(set(values))
    runs: list[str] = []
    start = prev = nums[0]
    for n in nums[1:] + [None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        runs.append(str(start) if start == prev else f"{start}..{prev}")
        if n is not None:
            start = prev = n
    return "{" + ",".join(runs) + "}"


def group_names(names: Sequence[str], payload: Callable[[str], Hashable] | None = None) -> list[KeyGroup]:
    """Usage: ``group_names(["l.0.w", "l.1.w", "x"])`` -> ``[KeyGroup("l.{0..1}.w", ...), KeyGroup("x", ...)]``.

    Names that differ only in one numeric component (the outermost that varies) and share ``payload(name)``
    fold into one pattern; groups keep the order of their first member.
    """
    buckets: dict[tuple, list[list[str]]] = {}
    order: list[tuple] = []
    for name in names:
        parts = name.split(".")
        numeric = [i for i, p in enumerate(parts) if _is_index(p)]
        template = tuple("#" if i in numeric else p for i, p in enumerate(parts))
        key = (template, payload(name) if payload else None)
        if key not in buckets:
            buckets[key] = []
            order.append(key)
        buckets[key].append(parts)
    groups: list[tuple[int, KeyGroup]] = []
    position = {name: i for i, name in reversed(list(enumerate(names)))}
    for key in order:
        members = buckets[key]
        numeric = [i for i, p in enumerate(key[0]) if p == "#"]
        varying = [i for i in numeric if len({m[i] for m in members}) > 1]
        sub: dict[tuple, list[list[str]]] = {}
        for m in members:
            sub.setdefault(tuple(m[i] for i in varying[1:]), []).append(m)
        for same in sub.values():
            first = ".".join(same[0])
            if len(same) == 1:
                groups.append((position[first], KeyGroup(first, (first,))))
                continue
            axis = varying[0]
            parts = list(same[0])
            parts[axis] = _format_numbers([int(m[axis]) for m in same])
            groups.append((position[first], KeyGroup(".".join(parts), tuple(".".join(m) for m in same))))
    groups.sort(key=lambda g: g[0])
    return [g for _, g in groups]


def _meta(t: Any) -> TensorMeta:
    return TensorMeta(tuple(int(d) for d in t.shape), str(t.dtype).removeprefix("torch."))


def _type_name(obj: Any) -> str:
    return type(obj).__name__


def _storage_key(t: Any) -> tuple | None:
    try:
        if t.device.type == "meta":
            return None
        return (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)
    except (RuntimeError, AttributeError, TypeError):  # storage-less subclasses raise RuntimeError kinds
        return None


def model_state(obj: Any, label: str | None = None) -> tuple[CheckpointInfo, dict[str, set[str]], dict[str, str]]:
    """Usage: ``info, aliases, class_ties = model_state(model)``.

    ``info.tensors``: persistent parameters and buffers of a module (duplicates kept, like ``state_dict()``),
    or the tensor entries of a mapping. ``aliases[name]``: other names of the same tensor (tied weights).
    ``class_ties``: ties the model's class declares (``_tied_weights_keys``), whether or not they hold now.
    Raises ``CheckpointError`` for anything else.
    """
    tensors: dict[str, TensorMeta] = {}
    by_identity: dict[Any, list[str]] = {}
    notes: list[str] = []
    class_ties: dict[str, str] = {}
    nested: str | None = None
    if is_module(obj):
        kind = "module"
        label = label or _type_name(obj)
        for prefix, module in obj.named_modules(remove_duplicate=False):
            base = f"{prefix}." if prefix else ""
            params = getattr(module, "_parameters", None) or {}
            buffers = getattr(module, "_buffers", None) or {}
            transient = getattr(module, "_non_persistent_buffers_set", None) or set()
            for store, skip in ((params, ()), (buffers, transient)):
                for name, t in list(store.items()):
                    if t is None or name in skip:
                        continue
                    tensors[base + name] = _meta(t)
                    by_identity.setdefault(id(t), []).append(base + name)
        tied_now = static_attr(obj, "all_tied_weights_keys", None)
        if issubclass(type(tied_now), Mapping):
            for target, source in tied_now.items():
                if target in tensors and source in tensors:
                    by_identity.setdefault(("declared", source), [source]).append(target)
        declared = static_attr(type(obj), "_tied_weights_keys", None)
        if issubclass(type(declared), Mapping):
            class_ties = {str(k): str(v) for k, v in declared.items()}
    elif issubclass(type(obj), Mapping):  # by type: isinstance would read a hostile __class__
        kind = "state dict"
        label = label or "state dict"
        found, nested, found_notes = find_state_dict(obj if type(obj) is dict else dict(obj), label)
        notes.extend(found_notes)
        for name, t in found.items():
            tensors[name] = _meta(t)
            by_identity.setdefault(id(t), []).append(name)
            storage = _storage_key(t)
            if storage is not None:
                by_identity.setdefault(("storage", storage), []).append(name)
    else:
        what = f"{label} is a {_type_name(obj)}" if label else f"a {_type_name(obj)}"
        raise CheckpointError(f"{what}, not a module, a state dict or a checkpoint path")
    aliases: dict[str, set[str]] = {}
    for names in by_identity.values():
        if len(set(names)) > 1:
            for name in names:
                aliases.setdefault(name, set()).update(n for n in names if n != name)
    on_meta = _meta_names(obj)
    meta = [n for n in tensors if n in on_meta]
    if meta:
        notes.append(f"meta: values unknown for {len(meta)} tensor{'s' if len(meta) != 1 else ''} of {label} "
                     f"on the meta device ({meta[0]}{'…' if len(meta) > 1 else ''}); only names, shapes and "
                     "dtypes compared")
    info = CheckpointInfo(label, kind, tensors, [], nested, notes)
    return info, aliases, class_ties


def _meta_names(obj: Any) -> set[str]:
    """Names of ``obj``'s tensors (module parameters/buffers or mapping entries) on the meta device."""
    out: set[str] = set()
    if is_module(obj):
        for prefix, module in obj.named_modules(remove_duplicate=False):
            base = f"{prefix}." if prefix else ""
            for store in (getattr(module, "_parameters", None) or {}, getattr(module, "_buffers", None) or {}):
                out.update(base + n for n, t in list(store.items()) if t is not None and t.device.type == "meta")
    elif issubclass(type(obj), Mapping):
        found = find_state_dict(obj if type(obj) is dict else dict(obj), "")[0]
        out.update(n for n, t in found.items() if t.device.type == "meta")
    return out


def _apply(steps: Sequence[tuple[str, str]], keys: Mapping[str, TensorMeta]) -> dict[str, tuple[str, TensorMeta]]:
    """Renamed checkpoint keys -> (original key, meta); the first of colliding names wins."""
    out: dict[str, tuple[str, TensorMeta]] = {}
    for original, meta in keys.items():
        name = original
        for action, prefix in steps:
            if action == "strip" and name.startswith(prefix):
                name = name[len(prefix):]
            elif action == "add":
                name = prefix + name
        out.setdefault(name, (original, meta))
    return out


def _found(model_keys: Sequence[str], other: Mapping[str, Any], aliases: Mapping[str, set[str]]) -> int:
    return sum(1 for k in model_keys if k in other or any(a in other for a in aliases.get(k, ())))


def _discovered(model_keys: Sequence[str], other: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Prefixes seen in the data: ``other`` key == prefix + model key (strip) or the reverse (add)."""
    counts: dict[tuple[str, str], int] = {}
    for action, keys, targets in (("strip", other, set(model_keys)), ("add", model_keys, other)):
        for key in keys:
            for i, ch in enumerate(key):
                if ch == "." and key[i + 1:] in targets:
                    counts[(action, key[:i + 1])] = counts.get((action, key[:i + 1]), 0) + 1
    return sorted(counts, key=lambda c: -counts[c])[:4]


class AmbiguousPrefix(Exception):
    """Several key renamings explain the same number of model names: ``args = (descriptions, before, after,
    total)``."""


def _detect_prefix(model_keys, other, aliases, base_prefix: str | None) -> PrefixFix | None:
    prefixes = list(PREFIXES)
    if base_prefix and f"{base_prefix}." not in prefixes:
        prefixes.insert(3, f"{base_prefix}.")
    candidates = [(a, p) for a in ("strip", "add") for p in prefixes]
    before = best = _found(model_keys, other, aliases)
    if best == len(model_keys):
        return None
    candidates = list(dict.fromkeys(candidates + _discovered(model_keys, other)))
    steps: list[tuple[str, str]] = []
    for _ in range(3):
        choice, ties = None, []
        for step in candidates:
            score = _found(model_keys, _apply(steps + [step], other), aliases)
            if score > best:
                best, choice, ties = score, step, [step]
            elif choice is not None and score == best:
                ties.append(step)
        if choice is None:
            break
        results = {frozenset(_apply(steps + [t], other)) for t in ties}
        if len(results) > 1:  # several renamings explain as many names: name them, pick none
            fits = [PrefixFix(tuple(steps + [t]), before, best, len(model_keys)).describe() for t in ties]
            raise AmbiguousPrefix(fits, before, best, len(model_keys))
        steps.append(choice)
        if best == len(model_keys):
            break
    return PrefixFix(tuple(steps), before, best, len(model_keys)) if steps else None


def diff_states(
    model: CheckpointInfo,
    other: CheckpointInfo,
    aliases: Mapping[str, set[str]] | None = None,
    *,
    base_prefix: str | None = None,
    class_ties: Mapping[str, str] | None = None,
) -> StateDiff:
    """Usage: ``diff_states(model_info, checkpoint_info, aliases)``; the pure comparison behind ``statediff``."""
    aliases = aliases or {}
    keys = list(model.tensors)
    ambiguity = None
    try:
        fix = _detect_prefix(keys, other.tensors, aliases, base_prefix)
    except AmbiguousPrefix as exc:
        fits, before, after, total = exc.args
        fix, ambiguity = None, (f"ambiguous prefix: {' or '.join(fits)} each give {after}/{total} names "
                                f"({before}/{total} as saved); none applied")
    renamed = _apply(fix.steps if fix else (), other.tensors)
    ties = {**{v: k for k, v in (class_ties or {}).items()}, **(class_ties or {})}
    diff = StateDiff(
        model_label=model.label, other_label=other.label, other_kind=other.kind, other_files=len(other.files),
        model_count=len(keys), other_count=len(other.tensors), matched=0, prefix=fix,
        nested_under=other.nested_under, notes=list(model.notes) + list(other.notes),
        model_names=keys, other_names=list(other.tensors),
    )
    if ambiguity:
        diff.notes.insert(0, ambiguity)
    for name in keys:
        mine = model.tensors[name]
        if name not in renamed:
            alias = next((a for a in sorted(aliases.get(name, ())) if a in renamed), None)
            if alias is not None:
                diff.tied.append((name, alias))
                continue
            diff.missing.append(name)
            partner = ties.get(name)
            if partner in renamed:
                diff.notes.append(
                    f"{name}: the model's class can tie it to {partner}, but here it is a separate tensor "
                    f"(tie_word_embeddings off), so the checkpoint does not fill it"
                )
            continue
        theirs = renamed[name][1]
        if mine.shape != theirs.shape:
            diff.shape_mismatches.append(Mismatch(name, mine, theirs))
        if mine.dtype != theirs.dtype:
            diff.dtype_mismatches.append(Mismatch(name, mine, theirs))
        if mine == theirs:
            diff.matched += 1
    present = set(keys)
    diff.unexpected = [(orig, meta) for name, (orig, meta) in renamed.items() if name not in present]
    return diff


def statediff(
    model: Any,
    path_or_other: Any,
    *,
    unsafe_trusted: bool = False,
    model_label: str | None = None,
    other_label: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> StateDiff:
    """Usage: ``statediff(model, "ckpt/")`` or ``statediff(model, other_model)`` -> ``StateDiff``.

    ``model``: a module or a state dict. ``path_or_other``: a checkpoint path (file, sharded folder,
    ``*.index.json``), a module, a state dict or a ``CheckpointInfo``. ``unsafe_trusted=True`` lets a pickle
    run code (only for files you trust). ``progress(done, total)`` follows a sharded checkpoint's shards.
    Raises ``CheckpointError`` with a one-line message.
    """
    info, aliases, class_ties = model_state(model, model_label)
    if type(path_or_other) is CheckpointInfo:
        other = path_or_other
    elif issubclass(type(path_or_other), (str, os.PathLike)):
        other = read_checkpoint(path_or_other, unsafe_trusted=unsafe_trusted, progress=progress)
        if other_label:
            other.label = other_label
    else:
        other = model_state(path_or_other, other_label)[0]
    base = static_attr(model, "base_model_prefix", None) if info.kind == "module" else None
    return diff_states(info, other, aliases, base_prefix=base if type(base) is str else None,
                       class_ties=class_ties)
