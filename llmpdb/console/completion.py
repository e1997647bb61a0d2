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
string keys through ``dict.keys``; no property, ``__getattr__``, ``__getattribute__``, ``__dir__``,
``__class__``, ``__len__`` or ``keys`` method of a user object runs (``isinstance`` is judged on
``type(obj).__mro__``; the instance ``__dict__`` is read only through the type's standard slot). A dict
subclass offers its keys only when no user class before ``dict`` defines ``keys``, ``__iter__`` or
``__getitem__`` (``ModelOutput``, ``OrderedDict``, ``defaultdict``, ``Counter`` do). A chain step that would
run code (a property, a bound method, an object with its own ``__getattribute__``) offers nothing.
"""

from __future__ import annotations

import builtins
import keyword
import os
import re
import types
from collections import Counter, OrderedDict, UserDict, defaultdict
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


_MRO = type.__dict__["__mro__"]
_CLASS_DICT = type.__dict__["__dict__"]
_NAME_OF = type.__dict__["__name__"]
_DICT_SLOTS = (types.GetSetDescriptorType, types.MemberDescriptorType)
_TRUSTED_DICTS = (OrderedDict, defaultdict, Counter)  # stdlib dict subclasses whose storage is their contents


def _mro(klass) -> tuple:
    try:
        return _MRO.__get__(klass)
    except (AttributeError, TypeError):
        return ()


def _class_dict(klass) -> Mapping:
    try:
        return _CLASS_DICT.__get__(klass)
    except (AttributeError, TypeError):
        return {}


def _lookup(klass, name: str):
    """``name`` in ``klass``'s ``__mro__`` dictionaries (``(True, value)``), like ``inspect.getattr_static``."""
    for base in _mro(klass):
        space = _class_dict(base)
        if name in space:
            return True, space[name]
    return False, None


def _is_a(obj, klass) -> bool:
    """``isinstance`` by ``type(obj).__mro__`` alone (``isinstance`` would read a ``__class__`` property)."""
    return klass in _mro(type(obj))


def _named_in_mro(obj, name: str) -> bool:
    return any(_NAME_OF.__get__(k) == name for k in _mro(type(obj)))


def _instance_dict(obj) -> dict:
    """The instance ``__dict__``, read through the type's standard ``__dict__`` slot only (never a property)."""
    found, slot = _lookup(type(obj), "__dict__")
    if not found or type(slot) not in _DICT_SLOTS or slot.__name__ != "__dict__":
        return {}
    try:
        value = slot.__get__(obj, type(obj))
    except (AttributeError, TypeError):
        return {}
    return value if type(value) is dict else {}


def _type_dicts(obj) -> list[Mapping]:
    return [_class_dict(klass) for klass in _mro(type(obj))]


def _module_parts(obj) -> dict:
    """``_parameters``, ``_buffers`` and ``_modules`` of a torch module (any object that has them stored)."""
    own = _instance_dict(obj)
    parts: dict = {}
    for slot in ("_parameters", "_buffers", "_modules"):
        value = own.get(slot)
        if _is_a(value, dict):
            parts.update((k, v) for k, v in dict.items(value) if type(k) is str)
    return parts


def _is_model_output(obj) -> bool:
    return _is_a(obj, dict) and _named_in_mro(obj, "ModelOutput")


def attribute_names(obj) -> list[str]:
    """Usage: ``attribute_names(outputs)`` -> ``["logits", ...]``; names found without running user code."""
    names: set[str] = set()
    spaces = _type_dicts(obj)
    if _is_a(obj, type):  # a class: its own attributes, then its metaclass's
        spaces = [_class_dict(klass) for klass in _mro(obj)] + spaces
    for space in spaces:
        names.update(k for k in space if type(k) is str)
    names.update(k for k in _instance_dict(obj) if type(k) is str)
    names.update(_module_parts(obj))
    if _is_model_output(obj):  # its fields are its keys: a field left unset (None) is not offered
        keys = {k for k in dict.keys(obj) if type(k) is str and k.isidentifier()}
        for space in _type_dicts(obj):
            fields = space.get("__dataclass_fields__")
            if type(fields) is dict:
                names.difference_update(set(fields) - keys)
        names.update(keys)
    return sorted(names)


def _storage_is_contents(obj) -> bool:
    """Whether a dict subclass's own storage is what it shows: no user class before ``dict`` in its
    ``__mro__`` defines ``keys``, ``__iter__`` or ``__getitem__`` (a transformers ``ModelOutput`` keeps its
    fields as items and is trusted; ``OrderedDict``, ``defaultdict`` and ``Counter`` too)."""
    if type(obj) is dict or _is_model_output(obj):
        return True
    for klass in _mro(type(obj)):
        if klass is dict:
            return True
        if klass in _TRUSTED_DICTS:
            continue
        if any(name in _class_dict(klass) for name in ("keys", "__iter__", "__getitem__")):
            return False
    return True


def _mapping_of(obj) -> dict | None:
    """The plain dict behind ``obj``: a dict (subclass) itself, a ``UserDict``/``BatchEncoding``'s ``data``."""
    if _is_a(obj, dict):
        return obj if _storage_is_contents(obj) else None
    if _is_a(obj, UserDict) or _named_in_mro(obj, "BatchEncoding"):
        data = _instance_dict(obj).get("data")
        if type(data) is dict:
            return data
    return None


def dict_keys(obj) -> list[str]:
    """Usage: ``dict_keys(inputs)`` -> ``["attention_mask", "input_ids"]``; the string keys, via ``dict.keys``."""
    mapping = _mapping_of(obj)
    if mapping is None:
        return []
    return sorted(k for k in dict.keys(mapping) if type(k) is str)


def _is_data_descriptor(value) -> bool:
    return _lookup(type(value), "__set__")[0] or _lookup(type(value), "__delete__")[0]


def _attribute(obj, name: str):
    """``obj.name`` the way ``inspect.getattr_static`` sees it; ``_Unreachable`` where code would run."""
    if _is_a(obj, type):
        found, value = _lookup(obj, name)
        if found and not _lookup(type(value), "__get__")[0]:
            return value
        raise _Unreachable(name)
    found, value = _lookup(type(obj), name)
    if _lookup(type(obj), "__getattribute__")[1] is not object.__getattribute__ and not _is_a(obj, dict):
        raise _Unreachable(name)  # its own __getattribute__ decides what obj.name is
    if found and _is_data_descriptor(value):
        raise _Unreachable(name)  # a property (or slot) wins over the instance dict and must run
    own = _instance_dict(obj)
    if name in own:
        return own[name]
    parts = _module_parts(obj)
    if name in parts:
        return parts[name]
    if _is_model_output(obj) and dict.__contains__(obj, name):
        return dict.__getitem__(obj, name)
    if found and not _lookup(type(value), "__get__")[0]:
        return value  # a class attribute that is plain data (a method or property would have to run)
    raise _Unreachable(name)


def _item(obj, key):
    if isinstance(key, int):
        if type(obj) in (list, tuple):
            try:
                return (list.__getitem__ if type(obj) is list else tuple.__getitem__)(obj, key)
            except IndexError:
                raise _Unreachable(key) from None
        modules = _instance_dict(obj).get("_modules")
        if type(modules) is dict and str(key) in modules:
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
        if type(inner) is dict and set(dict.keys(inner)) == {"module"}:  # DDP / FSDP: names start inside the wrapper
            module = inner["module"]
        for part in parents.split(".") if parents else []:
            children = _instance_dict(module).get("_modules")
            module = dict.get(children, part) if type(children) is dict else None
            if module is None:
                break
        if module is None:
            continue
        children = _instance_dict(module).get("_modules")
        if type(children) is dict:
            found.update(k for k, v in dict.items(children) if type(k) is str and v is not None)
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
