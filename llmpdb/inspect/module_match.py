"""Which modules a break-module pattern selects: a qualified name (or a dotted suffix), a glob, a class.

Usage::

    match_modules("layers.*.mlp", [model])        # [ModuleMatch(names=("model.layers.0.mlp",), ...), ...]
    match_modules("LlamaAttention", [model])
    match_modules("model.model.layers.1", [model], aliases=["model"])   # a leading root variable name
    near_names("self_atn", [model])                # difflib's closest names, for the error message

Names come from ``model_names`` (``named_modules(remove_duplicate=False)``, wrappers looked through).
A name pattern matches a module when it equals (or, with ``*?[``, glob-matches) the whole name or a
dotted suffix of it; a pattern without dots also matches class names. In globs ``*`` and ``?`` stay
within one dotted component (``blocks.*`` is the blocks, not their children) and ``**`` crosses dots.
"""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass, field

from .modules import model_names

__all__ = ["ModuleMatch", "NoModuleMatch", "match_modules", "near_names", "is_glob", "class_matches", "glob_matches"]


class NoModuleMatch(ValueError):
    """Nothing matches a pattern; ``near`` holds the closest names and class names."""

    def __init__(self, pattern: str, near: list[str]):
        hint = f"; near: {', '.join(near)}" if near else ""
        super().__init__(f"no module matches {pattern!r}{hint}")
        self.pattern = pattern
        self.near = near


@dataclass(frozen=True)
class ModuleMatch:
    """A module a pattern selects, with its names under the root it was found in."""

    module: object = field(repr=False, compare=False)
    names: tuple[str, ...]
    class_name: str
    root: object = field(default=None, repr=False, compare=False)   # the root it was found under

    @property
    def label(self) -> str:
        return self.names[0] if self.names and self.names[0] else f"(root {self.class_name})"


def is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


@functools.lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern:
    """``*`` -> one component's characters, ``**`` -> anything, ``?`` -> one character, ``[..]`` kept."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if ch == "*":
            out.append("[^.]*")
        elif ch == "?":
            out.append("[^.]")
        elif ch == "[":
            end = pattern.find("]", i + 2)
            if end == -1:
                out.append(re.escape(ch))
            else:
                body = pattern[i + 1:end]
                out.append("[" + ("^" + body[1:] if body.startswith("!") else body).replace("\\", "\\\\") + "]")
                i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return re.compile("".join(out) + r"\Z")


def glob_matches(pattern: str, text: str) -> bool:
    """Usage: ``glob_matches("layers.*.mlp", "layers.0.mlp")`` -> True; ``*`` never crosses a dot."""
    return _glob_regex(pattern).match(text) is not None


def _name_matches(pattern: str, name: str, glob: bool) -> bool:
    if not name:
        return False
    parts = name.split(".")
    for i in range(len(parts)):
        suffix = ".".join(parts[i:])
        if (glob_matches(pattern, suffix) if glob else suffix == pattern):
            return True
    return False


def class_matches(pattern: str, class_name: str, glob: bool) -> bool:
    if "." in pattern:
        return False
    return glob_matches(pattern, class_name) if glob else class_name == pattern


def _match_one(pattern: str, roots) -> list[ModuleMatch]:
    glob = is_glob(pattern)
    found: dict[int, ModuleMatch] = {}
    for root in roots:
        names = model_names(root)
        try:
            items = list(names.naming_root.named_modules())
        except Exception:  # a root whose traversal fails: nothing to match there
            continue
        for _, module in items:
            if id(module) in found:
                continue
            all_names = names.names_of(module)
            cls = type(module).__name__
            if any(_name_matches(pattern, n, glob) for n in all_names) or class_matches(pattern, cls, glob):
                found[id(module)] = ModuleMatch(module, tuple(all_names), cls, root)
    return list(found.values())


def match_modules(pattern: str, roots, aliases=()) -> list[ModuleMatch]:
    """Usage: ``match_modules("layers.*.mlp", [model])``; modules selected by a name, glob or class."""
    pattern = pattern.strip()
    if not pattern:
        return []
    found = _match_one(pattern, roots)
    if found:
        return found
    for alias in aliases:
        if pattern == alias:
            return [ModuleMatch(r, ("",), type(r).__name__, r) for r in roots]
        if alias and pattern.startswith(alias + "."):
            found = _match_one(pattern[len(alias) + 1:], roots)
            if found:
                return found
    return []


def near_names(pattern: str, roots, limit: int = 5) -> list[str]:
    """Usage: ``near_names("self_atn", [model])``; qualified and class names close to ``pattern``."""
    candidates: set[str] = set()
    for root in roots:
        names = model_names(root)
        for entry in names.names.values():
            for name in entry:
                if name:
                    candidates.add(name)
                    candidates.add(name.rsplit(".", 1)[-1])
        candidates.update(names.classes)
    return difflib.get_close_matches(pattern, sorted(candidates), n=limit, cutoff=0.5)
