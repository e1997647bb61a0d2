"""The tensors themselves, by access path, found by the same walk as ``shapes`` (by type only, no properties).

Usage::

    found = collect_tensors(outputs, "outputs")      # TensorCollection: [("outputs.logits", t), ...]
    found = collect_frame_tensors(frame_locals)      # every local, as `shapes` lists them
    found.walk                                        # the TensorWalk (TensorInfo rows, notes, limits)
    found.aliases                                     # {"x2": "x"}: the same tensor reached twice
    tree = nest_paths({"outputs.logits": t, "cache.layers[0].keys": k})   # {"outputs": ..., "cache": ...}

``collect_*`` keep each tensor once (the first path that reaches it; later paths, a module's tied weights
included, are ``aliases``) and use
larger limits than the table (``max_items`` 100000, ``max_depth`` 12). ``nest_paths`` is the inverse used by
``python -m llmpdb open``: ``.name`` parts become attributes of a ``SavedNode``, ``[key]`` parts dict keys
(a state dict's ``.0`` is read as ``[0]``),
so ``outputs.logits`` and ``inputs['input_ids']`` evaluate as they did in the saved frame.
"""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .tensors import TensorWalk, _is_instance, _param_path, _Walker

__all__ = ["TensorCollection", "collect_tensors", "collect_frame_tensors", "split_path", "nest_paths",
           "SavedNode"]


@dataclass
class TensorCollection:
    """``items``: ``(path, tensor)`` each tensor once, walk order; ``walk``: the metadata rows and notes."""

    items: list[tuple[str, Any]]
    walk: TensorWalk
    aliases: dict[str, str] = field(default_factory=dict)


class _Collector(_Walker):
    def __init__(self, max_depth: int, max_items: int) -> None:
        super().__init__(max_depth, max_items, stats=False)
        self.items: list[tuple[str, Any]] = []
        self.paths: dict[int, str] = {}
        self.aliases: dict[str, str] = {}

    def add_tensor(self, t: Any, path: str) -> None:
        full = len(self.out) >= self.max_items
        super().add_tensor(t, path)
        if full:
            return
        first = self.paths.get(id(t))
        if first is None:
            self.paths[id(t)] = path
            self.items.append((path, t))
        else:
            self.aliases[path] = first

    def _visit(self, obj: Any, path: str, depth: int, explicit: bool) -> None:
        walked = explicit and id(obj) not in self.seen and _is_instance(obj, "torch.nn", "Module")
        super()._visit(obj, path, depth, explicit)
        if walked:  # tied weights (GPT-2's lm_head.weight is wte.weight): named_parameters() names them once
            chain = itertools.chain(obj.named_parameters(remove_duplicate=False),
                                    obj.named_buffers(remove_duplicate=False))
            for name, t in chain:
                alias, first = _param_path(path, name), self.paths.get(id(t))
                if first is not None and alias != first:
                    self.aliases.setdefault(alias, first)

    def result(self) -> TensorCollection:
        return TensorCollection(self.items, self.out, self.aliases)


def collect_tensors(obj: Any, path: str, *, max_depth: int = 12, max_items: int = 100000) -> TensorCollection:
    """Usage: ``collect_tensors(outputs, "outputs")``; ``obj`` walked explicitly (a module: its parameters)."""
    walker = _Collector(max_depth, max_items)
    walker.visit(obj, path, 0, explicit=True)
    return walker.result()


def collect_frame_tensors(locals: Mapping[str, Any], *, max_depth: int = 12,
                          max_items: int = 100000) -> TensorCollection:
    """Usage: ``collect_frame_tensors(debugger.frame_locals())``; every local but dunders, one walk."""
    walker = _Collector(max_depth, max_items)
    for name, value in list(locals.items()):
        if isinstance(name, str) and name.startswith("__") and name.endswith("__"):
            continue
        walker.visit(value, str(name), 0)
    return walker.result()


_ATTR = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)")
_INDEX = re.compile(r"\.(\d+)(?=[.\[]|$)")
_ROOT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _bracket_end(path: str, start: int) -> int:
    """Index just past the ``]`` that closes the ``[`` at ``start`` (quotes respected)."""
    quote, i = "", start + 1
    while i < len(path):
        ch = path[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "]":
            return i + 1
        i += 1
    raise ValueError(f"unclosed [ in {path!r}")


def split_path(path: str) -> list[tuple[str, Any]]:
    """Usage: ``split_path("x.a[0]['k']")`` -> ``[("root", "x"), ("attr", "a"), ("item", 0), ("item", "k")]``.

    ``ValueError`` for a path that is not a name followed by ``.attr`` and ``[literal]`` parts."""
    match = _ROOT.match(path)
    if not match:
        raise ValueError(f"{path!r} does not start with a name")
    parts: list[tuple[str, Any]] = [("root", match.group())]
    i = match.end()
    while i < len(path):
        if path[i] == ".":
            digits = _INDEX.match(path, i)
            if digits:  # a state dict's layers.0: read as layers[0]
                parts.append(("item", int(digits.group(1))))
                i = digits.end()
                continue
            attr = _ATTR.match(path, i)
            if not attr:
                raise ValueError(f"bad attribute in {path!r}")
            parts.append(("attr", attr.group(1)))
            i = attr.end()
        elif path[i] == "[":
            end = _bracket_end(path, i)
            parts.append(("item", ast.literal_eval(path[i + 1:end - 1])))  # literals only: never code
            i = end
        else:
            raise ValueError(f"unexpected {path[i]!r} in {path!r}")
    return parts


class SavedNode:
    """An object rebuilt from saved paths: ``.name`` children are attributes; ``[key]`` children live in
    ``items`` (a dict), reachable as ``node[key]``."""

    def __init__(self) -> None:
        self.items: dict[Any, Any] = {}

    def __getitem__(self, key: Any) -> Any:
        return self.items[key]

    def __repr__(self) -> str:
        names = [k for k in vars(self) if k != "items"]
        return f"<saved {', '.join(names + [repr(k) for k in self.items]) or 'nothing'}>"


MAX_PATH_PARTS = 64  # model.layers.0.self_attn.q_proj.weight has 6; a path of thousands is hostile
_RESERVED = {"items"}  # SavedNode's own attribute


def _odd(parts: list[tuple[str, Any]]) -> bool:
    """A path ``nest_paths`` refuses: a dunder name (``z.__class__``), ``.items``, an unhashable key, too long."""
    if len(parts) > MAX_PATH_PARTS:
        return True
    for kind, key in parts:
        if kind in ("root", "attr") and (key.startswith("__") or (kind == "attr" and key in _RESERVED)):
            return True
        if kind == "item":
            try:
                hash(key)
            except TypeError:
                return True
    return False


def nest_paths(flat: Mapping[str, Any], refused: list[str] | None = None) -> dict[str, Any]:
    """Usage: ``nest_paths({"outputs.logits": t})`` -> ``{"outputs": SavedNode(logits=t)}``.

    A node whose children are all ``[key]`` becomes a dict; one with ``.name`` children a ``SavedNode``.
    Paths that do not parse, or that reach inside another path's tensor (``x.y`` beside ``x``), are kept
    whole under their own text (not a valid local name). Paths with a dunder part (``z.__class__``,
    ``__builtins__``), a ``.items`` part, an unhashable key (``q[[1]]``) or more than ``MAX_PATH_PARTS``
    parts are left out and appended to ``refused``. Linear in the total length of the paths."""
    tree: dict[str, Any] = {}
    parsed = []
    for path, value in flat.items():
        try:
            parts = split_path(path)
        except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
            tree[path] = value
            continue
        if _odd(parts):
            if refused is not None:
                refused.append(path)
            continue
        parsed.append((parts, value, path))

    def key(parts: list) -> tuple:
        return tuple((k, repr(v)) for k, v in parts)

    leaves = {key(parts) for parts, _, _ in parsed}
    nested = []
    for parts, value, path in parsed:  # "x.y" beside a tensor "x": x stays the tensor, x.y is kept whole
        keyed = key(parts)
        if any(keyed[:depth] in leaves for depth in range(1, len(parts))):
            tree[path] = value
        else:
            nested.append((parts, value))
    parsed = nested
    kinds: dict[tuple, str] = {}
    for parts, _ in parsed:
        for depth in range(1, len(parts)):
            prefix = tuple((k, repr(v)) for k, v in parts[:depth])
            kind = parts[depth][0]
            if kinds.get(prefix, kind) != kind:
                kinds[prefix] = "mixed"
            else:
                kinds.setdefault(prefix, kind)
    nodes: dict[tuple, Any] = {}

    def node_for(prefix: tuple) -> Any:
        if prefix not in nodes:
            nodes[prefix] = {} if kinds.get(prefix) == "item" else SavedNode()
        return nodes[prefix]

    for parts, value in parsed:
        root = parts[0][1]
        if len(parts) == 1:
            tree[root] = value
            continue
        prefix = (("root", repr(root)),)
        tree.setdefault(root, node_for(prefix))
        holder = node_for(prefix)
        for depth in range(1, len(parts)):
            kind, key = parts[depth]
            leaf = depth == len(parts) - 1
            child = value if leaf else node_for(prefix + ((kind, repr(key)),))
            if kind == "attr":
                setattr(holder, key, child)
            else:
                (holder if isinstance(holder, dict) else holder.items)[key] = child
            prefix = prefix + ((kind, repr(key)),)
            holder = child
    return tree
