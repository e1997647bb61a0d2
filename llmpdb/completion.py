"""What TAB offers at the ``(llmpdb)`` prompt: pure logic, no terminal (the prompt_toolkit side is ``console``).

Usage::

    context = CompletionContext(commands={"stack-model": "stack-model [--all]"}, namespace=frame_names,
                                roots=lambda: [model])
    completions("stack-m", context)          # [Candidate(text="stack-model", start=-7)]
    completions("p outputs.lo", context)     # [Candidate(text="logits", start=-2)]

A candidate replaces the last ``-start`` characters before the cursor with ``text``. What is offered:

- the first word: command names (hyphenated ones whole: ``stack-m`` -> ``stack-model``) and the names in
  the frame (locals over globals over builtins);
- a word starting with ``-`` after a command: the options of its usage line (``shapes --st`` -> ``--stats``);
- after ``help``/``h``: command names (``help stack-`` -> ``stack-model``);
- after ``break-module``/``bm``: module paths of the root models (``model.layers.1.se`` -> ``self_attn``),
  walked through each module's ``_modules`` read from its instance ``__dict__``;
- after ``statediff``, ``dump`` and ``snapshot``: file paths;
- anywhere else the expression before the cursor: names, attributes (``outputs.lo`` -> ``logits``) and
  string keys of dicts (``inputs['inp`` -> ``input_ids']``).

A debugger is a guest: objects are never asked what they hold. Attributes come from the type's ``__mro__``
dictionaries, the instance ``__dict__`` (through ``object.__getattribute__``), a module's
``_parameters``/``_buffers``/``_modules`` and, for a dict subclass (a transformers ``ModelOutput``), its
string keys through ``dict.keys``; no property, ``__getattr__``, ``__dir__`` or ``keys`` method of a user
object runs. A value that cannot be reached that way (a property) offers nothing.
"""

from __future__ import annotations

import builtins
import keyword
import os
import re
from collections import UserDict
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

__all__ = ["Candidate", "CompletionContext", "completions", "MODULE_COMMANDS", "PATH_COMMANDS",
           "attribute_names", "dict_keys", "resolve"]

MODULE_COMMANDS = frozenset({"break-module", "bm", "break_module"})
PATH_COMMANDS = frozenset({"statediff", "dump", "snapshot"})
HELP_COMMANDS = frozenset({"help", "h"})
_LIMIT = 500  # candidates offered at most (a namespace of thousands of names is not a menu)

_OPTION = re.compile(r"--[A-Za-z][\w-]*")
_CHAIN = r"[A-Za-z_]\w*(?:\.\w+|\[(?:\d+|'[^'\\]*'|\"[^\"\\]*\")\])*"
_ATTRIBUTE = re.compile(r"(?<![\w.\])])(?P<chain>" + _CHAIN + r")\.(?P<attr>\w*)$")
_KEY = re.compile(r"(?<![\w.\])])(?P<chain>" + _CHAIN + r")\[(?P<quote>['\"]?)(?P<key>[^'\"\]]*)$")
_NAME = re.compile(r"(?<![\w.\])])(?P<name>[A-Za-z_]\w*)?$")
_STEP = re.compile(r"\.(\w+)|\[(\d+)\]|\['([^'\\]*)'\]|\[\"([^\"\\]*)\"\]")


@dataclass(frozen=True)
class Candidate:
    text: str
    start: int  # <= 0: how many characters before the cursor the text replaces
    display: str | None = None


@dataclass
class CompletionContext:
    """What a completion may look at: command names with their usage lines, the frame's names, the models."""

    commands: Mapping[str, str] = field(default_factory=dict)
    namespace: Mapping[str, Any] = field(default_factory=dict)
    roots: Callable[[], list] = list
    expressions: bool = True  # False: command names and options only (the attach client knows no frame)


class _Unreachable(Exception):
    """A value that cannot be read without running the object's own code."""


def _instance_dict(obj) -> dict:
    try:
        found = object.__getattribute__(obj, "__dict__")
    except (AttributeError, TypeError):
        return {}
    return found if type(found) is dict else {}


def _type_dicts(obj) -> list[dict]:
    try:
        mro = type.__dict__["__mro__"].__get__(type(obj))
    except (AttributeError, TypeError):
        return []
    found = []
    for klass in mro:
        try:
            found.append(type.__dict__["__dict__"].__get__(klass))
        except (AttributeError, TypeError):
            continue
    return found


def _module_parts(obj) -> dict:
    """``_parameters``, ``_buffers`` and ``_modules`` of a torch module (any object that has them stored)."""
    own = _instance_dict(obj)
    parts: dict = {}
    for slot in ("_parameters", "_buffers", "_modules"):
        value = own.get(slot)
        if isinstance(value, dict):
            parts.update((k, v) for k, v in dict.items(value) if isinstance(k, str))
    return parts


def _is_model_output(obj) -> bool:
    return isinstance(obj, dict) and any(k.__name__ == "ModelOutput" for k in type(obj).__mro__)


def attribute_names(obj) -> list[str]:
    """Usage: ``attribute_names(outputs)`` -> ``["logits", ...]``; names found without running user code."""
    names: set[str] = set()
    for space in _type_dicts(obj):
        names.update(k for k in space if isinstance(k, str))
    names.update(k for k in _instance_dict(obj) if isinstance(k, str))
    names.update(_module_parts(obj))
    if _is_model_output(obj):  # its fields are its keys: a field left unset (None) is not offered
        keys = {k for k in dict.keys(obj) if isinstance(k, str) and k.isidentifier()}
        for space in _type_dicts(obj):
            fields = space.get("__dataclass_fields__")
            if isinstance(fields, dict):
                names.difference_update(set(fields) - keys)
        names.update(keys)
    return sorted(names)


def _mapping_of(obj) -> dict | None:
    """The plain dict behind ``obj``: a dict (subclass) itself, a ``UserDict``/``BatchEncoding``'s ``data``."""
    if isinstance(obj, dict):
        return obj
    data = _instance_dict(obj).get("data")
    if isinstance(data, dict) and (isinstance(obj, UserDict) or any(
            k.__name__ == "BatchEncoding" for k in type(obj).__mro__)):
        return data
    return None


def dict_keys(obj) -> list[str]:
    """Usage: ``dict_keys(inputs)`` -> ``["attention_mask", "input_ids"]``; the string keys, via ``dict.keys``."""
    mapping = _mapping_of(obj)
    if mapping is None:
        return []
    return sorted(k for k in dict.keys(mapping) if isinstance(k, str))


def _attribute(obj, name: str):
    own = _instance_dict(obj)
    if name in own:
        return own[name]
    parts = _module_parts(obj)
    if name in parts:
        return parts[name]
    if _is_model_output(obj) and dict.__contains__(obj, name):
        return dict.__getitem__(obj, name)
    for space in _type_dicts(obj):
        if name in space:
            value = space[name]
            if isinstance(obj, type) or not hasattr(type(value), "__get__"):
                return value  # a class attribute that is plain data (a method or property would have to run)
            raise _Unreachable(name)
    raise _Unreachable(name)


def _item(obj, key):
    if isinstance(key, int):
        if isinstance(obj, (list, tuple)):
            try:
                return (list.__getitem__ if isinstance(obj, list) else tuple.__getitem__)(obj, key)
            except IndexError:
                raise _Unreachable(key) from None
        modules = _instance_dict(obj).get("_modules")
        if isinstance(modules, dict) and str(key) in modules:
            return modules[str(key)]
    mapping = _mapping_of(obj)
    if mapping is not None and dict.__contains__(mapping, key):
        return dict.__getitem__(mapping, key)
    raise _Unreachable(key)


def resolve(chain: str, namespace: Mapping[str, Any]):
    """Usage: ``resolve("model.layers[0].mlp", names)``; the value, or ``_Unreachable`` raised."""
    head = re.match(r"[A-Za-z_]\w*", chain)
    if head is None:
        raise _Unreachable(chain)
    name = head.group(0)
    if name in namespace:
        value = namespace[name]
    elif hasattr(builtins, name):
        value = builtins.__dict__[name]
    else:
        raise _Unreachable(name)
    rest = chain[head.end():]
    while rest:
        step = _STEP.match(rest)
        if step is None:
            raise _Unreachable(rest)
        attr, index, key1, key2 = step.groups()
        if attr is not None:
            value = _attribute(value, attr)
        else:
            value = _item(value, int(index) if index is not None else (key1 if key1 is not None else key2))
        rest = rest[step.end():]
    return value


def _names(prefix: str, namespace: Mapping[str, Any]) -> list[str]:
    pool = set(k for k in namespace if isinstance(k, str)) | set(dir(builtins)) | set(keyword.kwlist)
    return sorted(n for n in pool if n.startswith(prefix))


def _expression(text: str, context: CompletionContext) -> list[Candidate]:
    match = _KEY.search(text)
    if match:
        try:
            keys = dict_keys(resolve(match.group("chain"), context.namespace))
        except _Unreachable:
            return []
        quote = match.group("quote") or "'"
        typed = match.group("key")
        start = -(len(typed) + len(match.group("quote")))
        return [Candidate(f"{quote}{k}{quote}]", start, k) for k in keys if k.startswith(typed)
                and quote not in k]
    match = _ATTRIBUTE.search(text)
    if match:
        try:
            value = resolve(match.group("chain"), context.namespace)
        except _Unreachable:
            return []
        prefix = match.group("attr")
        names = [n for n in attribute_names(value) if n.startswith(prefix)]
        if not prefix.startswith("_"):
            names = [n for n in names if not n.startswith("_")]
        return [Candidate(n, -len(prefix)) for n in names]
    match = _NAME.search(text)
    if match:
        prefix = match.group("name") or ""
        if not prefix:
            return []
        return [Candidate(n, -len(prefix)) for n in _names(prefix, context.namespace)]
    return []


def module_paths(word: str, roots: list) -> list[Candidate]:
    """Usage: ``module_paths("model.layers.1.se", [model])`` -> ``[Candidate("self_attn", -2)]``."""
    parents, _, prefix = word.rpartition(".")
    found: set[str] = set()
    for root in roots:
        module = root
        inner = _instance_dict(module).get("_modules")
        if isinstance(inner, dict) and set(inner) == {"module"}:  # DDP / FSDP: names start inside the wrapper
            module = inner["module"]
        for part in parents.split(".") if parents else []:
            children = _instance_dict(module).get("_modules")
            module = children.get(part) if isinstance(children, dict) else None
            if module is None:
                break
        if module is None:
            continue
        children = _instance_dict(module).get("_modules")
        if isinstance(children, dict):
            found.update(k for k, v in dict.items(children) if isinstance(k, str) and v is not None)
    return [Candidate(n, -len(prefix)) for n in sorted(found) if n.startswith(prefix)]


def file_paths(word: str) -> list[Candidate]:
    """Usage: ``file_paths("ckpt/mo")`` -> ``[Candidate("model.safetensors", -2)]``; directories end in ``/``."""
    folder, _, prefix = word.rpartition("/")
    where = os.path.expanduser(folder + "/" if folder or word.startswith("/") else ".")
    try:
        entries = sorted(os.listdir(where))
    except OSError:
        return []
    if not prefix.startswith("."):
        entries = [e for e in entries if not e.startswith(".")]
    out = []
    for entry in entries:
        if entry.startswith(prefix):
            is_dir = os.path.isdir(os.path.join(where, entry))
            out.append(Candidate(entry + ("/" if is_dir else ""), -len(prefix)))
    return out


def _command_name(word: str, context: CompletionContext) -> str:
    return word.replace("_", "-") if word.replace("_", "-") in context.commands else word


def completions(text: str, context: CompletionContext) -> list[Candidate]:
    """Usage: ``completions(line_before_cursor, context)``; never raises for any object in the namespace."""
    try:
        return _completions(text.rsplit("\n", 1)[-1], context)[:_LIMIT]
    except Exception:  # a completion must never break the prompt
        return []


def _completions(text: str, context: CompletionContext) -> list[Candidate]:
    stripped = text.lstrip()
    if not context.expressions:
        first = stripped.split(" ", 1)[0]
        return [Candidate(c, -len(first)) for c in sorted(context.commands)
                if first and c.startswith(first)] if " " not in stripped else []
    if stripped.startswith("!"):
        return _expression(stripped[1:], context)
    first, space, rest = stripped.partition(" ")
    if not space:
        if "." in first or "[" in first:
            return _expression(first, context)
        names = [c for c in sorted(context.commands) if c.startswith(first)] if first else []
        seen = set(names)
        names += [n for n in _names(first, context.namespace) if n not in seen] if first else []
        return [Candidate(n, -len(first)) for n in names]
    command = _command_name(first, context)
    word = re.split(r"\s", text)[-1]
    if command in HELP_COMMANDS and " " not in rest.strip(" "):  # help NAME: a command name
        return [Candidate(c, -len(word)) for c in sorted(context.commands) if c.startswith(word)]
    if word.startswith("-") and command in context.commands:
        options = sorted(set(_OPTION.findall(context.commands[command])))
        return [Candidate(o, -len(word)) for o in options if o.startswith(word)]
    if command in MODULE_COMMANDS and not rest.strip(" ").count(" ") and " if " not in f" {rest}":
        return module_paths(word, list(context.roots()))
    if command in PATH_COMMANDS and ("/" in word or word.startswith((".", "~"))):
        return file_paths(word)
    if command in PATH_COMMANDS:
        return _expression(text, context) + file_paths(word)
    return _expression(text, context)
