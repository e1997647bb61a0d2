"""Which module's ``forward`` each frame of a stack runs, with qualified names from the root model.

Usage::

    stack = frame_stack(frame)                       # [(frame, lineno), ...] outermost first, like pdb's
    entries = model_stack(stack, root=None)          # every frame: module row, user code or plumbing
    rows = [e.module for e in entries if e.module]   # ModuleFrame(index, qualname, class_name, ...)
    names = model_names(model)                       # ModelNames: id(module) -> all qualified names

A frame is a module frame when its ``self`` is an ``nn.Module`` (duck-typed: ``named_modules`` and
``forward``) and its code is that module's ``forward`` (through decorators: ``inspect.unwrap``, any class of
the MRO, an instance-level ``forward``). Qualified names come from ``named_modules(remove_duplicate=False)``
of the root, so a shared module gets every name; the root is the user's (``model EXPR``) or the outermost
module on the stack. Wrappers (torch.compile's ``_orig_mod``, DDP/FSDP ``module``, PEFT ``base_model.model``)
are looked through: names are those of the wrapped model, and the wrapper's own frame is labelled.
Plumbing frames (``_call_impl``, hooks, decorator wrappers, generation utilities, the debugger) are
marked ``hidden``. Nothing here reads tensor data.
"""

from __future__ import annotations

import functools
import inspect
import os
import weakref
from dataclasses import dataclass, field, replace

from .frames import frame_locals, frame_self
from .kinds import is_module
from .frame_kinds import TensorArg, is_plumbing, short_dtype, tensor_arg

__all__ = [
    "TensorArg", "ModuleFrame", "StackEntry", "ModelNames",
    "is_module", "top_level_models", "models_in", "frame_stack", "code_of", "forward_codes", "is_forward_frame", "unwrap_model", "model_names",
    "model_stack", "module_frames", "is_plumbing", "tensor_arg", "short_dtype", "ROOT_LABEL",
]

ROOT_LABEL = "(root)"

# Attributes through which a wrapper module holds the model it runs (the wrapper's only child).
_WRAPPER_ATTRS = (
    ("_orig_mod", "torch.compile"),
    ("module", "DDP"),
    ("_fsdp_wrapped_module", "FSDP"),
    ("_checkpoint_wrapped_module", "checkpoint"),
)

@dataclass(frozen=True)
class ModuleFrame:
    """A frame that runs a module's ``forward``; ``index`` is pdb's frame number."""

    index: int
    qualname: str                      # the name on this path ("" is the root)
    class_name: str
    func: str                          # "forward", or "Base.forward" for a super() call
    filename: str
    lineno: int
    first_tensor: TensorArg | None = None
    names: tuple[str, ...] = ()        # every name of the module (shared modules have several)
    tree: int = 0                      # 0: the first root; 1, 2...: other models on the stack
    wrapper: str | None = None         # "torch.compile", "DDP", "PEFT"... when the module is a wrapper
    module: object = field(default=None, repr=False, compare=False)

    @property
    def location(self) -> str:
        return f"{os.path.basename(self.filename)}:{self.lineno}"

    @property
    def other_names(self) -> tuple[str, ...]:
        return tuple(n for n in self.names if n != self.qualname)


@dataclass(frozen=True)
class StackEntry:
    """One frame of the stack as the model sees it."""

    index: int
    func: str
    filename: str
    lineno: int
    hidden: bool                       # plumbing: shown only with --all
    module: ModuleFrame | None = None

    @property
    def location(self) -> str:
        return f"{os.path.basename(self.filename)}:{self.lineno}"


@dataclass
class ModelNames:
    """Qualified names of every module under ``root`` (looked through wrappers)."""

    root: object
    naming_root: object
    wrappers: dict[int, str]           # id(wrapper module) -> kind
    names: dict[int, list[str]]        # id(module) -> names, in named_modules order
    classes: dict[str, int] = field(default_factory=dict)  # class name -> count

    def names_of(self, module) -> list[str]:
        return self.names.get(id(module), [])

    def __contains__(self, module) -> bool:
        return id(module) in self.names or id(module) in self.wrappers


def frame_stack(frame) -> list[tuple[object, int]]:
    """Usage: ``frame_stack(sys._getframe())``; ``[(frame, lineno)]`` outermost first, ``frame`` last."""
    stack = []
    while frame is not None:
        stack.append((frame, frame.f_lineno))
        frame = frame.f_back
    stack.reverse()
    return stack


def code_of(func):
    """The code object a callable finally runs, through ``__wrapped__``, ``__func__`` and partials."""
    for _ in range(20):
        try:
            func = inspect.unwrap(func)
        except (ValueError, Exception):  # a __wrapped__ cycle or a raising __getattr__: stop here
            pass
        if isinstance(func, functools.partial):
            func = func.func
            continue
        inner = getattr(func, "__func__", None)
        if inner is not None and inner is not func:
            func = inner
            continue
        break
    return getattr(func, "__code__", None)


_CLASS_CODES: "weakref.WeakKeyDictionary[type, frozenset]" = weakref.WeakKeyDictionary()


def forward_codes(module) -> frozenset:
    """Usage: ``frame.f_code in forward_codes(m)``; codes of every ``forward`` in the MRO and the instance."""
    cls = type(module)
    codes = _CLASS_CODES.get(cls)
    if codes is None:
        found = set()
        for klass in cls.__mro__:
            fwd = klass.__dict__.get("forward")
            code = code_of(fwd) if fwd is not None else None
            if code is not None:
                found.add(code)
        codes = frozenset(found)
        try:
            _CLASS_CODES[cls] = codes
        except TypeError:  # a class that refuses weak references: recompute next time
            pass
    try:
        own = vars(module).get("forward")
    except TypeError:
        own = None
    if own is not None:
        code = code_of(own)
        if code is not None and code not in codes:
            codes = codes | {code}
    return codes


def is_forward_frame(frame, module) -> bool:
    """Usage: ``is_forward_frame(f, self)``; True when ``frame`` runs a ``forward`` of ``module``."""
    code = frame.f_code
    if code in forward_codes(module):
        return True
    # A decorator without functools.wraps hides the code: fall back on the qualified function name.
    if code.co_name != "forward":
        return False
    owner = getattr(code, "co_qualname", "").rpartition(".")[0]
    return bool(owner) and any(k.__name__ == owner for k in type(module).__mro__)


def _frame_self(frame):
    """The module a method frame runs on (its first argument named ``self``), or None."""
    if frame.f_code.co_varnames[:1] != ("self",):
        return None
    value = frame_self(frame)
    return value if is_module(value) else None


def _only_child(module):
    try:
        children = list(module.named_children())
    except Exception:  # a module whose children cannot be listed is not a wrapper
        return None
    return children[0] if len(children) == 1 else None


def unwrap_model(module) -> tuple[object, list[tuple[object, str, str]]]:
    """Usage: ``inner, chain = unwrap_model(m)``; chain is ``[(wrapper, kind, attribute path)]``."""
    chain = []
    seen = set()
    while id(module) not in seen:
        seen.add(id(module))
        child = _only_child(module)
        if child is None:
            break
        name, inner = child
        kind = dict(_WRAPPER_ATTRS).get(name)
        if kind is None and name == "base_model" and _has_attr(module, "peft_config"):
            kind = "PEFT"
        if kind is None and name == "model" and _has_attr(module, "peft_config"):
            kind = "PEFT tuner"
        if kind is None or not is_module(inner):
            break
        chain.append((module, kind, name))
        module = inner
    return module, chain


def _has_attr(obj, name: str) -> bool:
    try:
        return hasattr(obj, name)
    except Exception:  # hasattr only swallows AttributeError
        return False


def top_level_models(candidates: list[tuple[str, object]]) -> list[tuple[str, object]]:
    """Usage: ``top_level_models([("model", m), ("layer", m.model.layers[0])])`` -> ``[("model", m)]``.

    The one finder of root models: modules only (instances; classes are never models), each once (the
    first name it has), minus those that are submodules of another candidate. A candidate whose traversal
    fails still counts as a root."""
    unique: list[tuple[str, object]] = []
    for name, value in candidates:
        if is_module(value) and all(value is not v for _, v in unique):
            unique.append((name, value))
    inside: set[int] = set()
    for _, module in unique:
        try:
            inside.update(id(sub) for _, sub in unwrap_model(module)[0].named_modules() if sub is not module)
        except Exception:  # a module whose traversal fails still counts as a candidate root
            continue
    return [(name, module) for name, module in unique if id(module) not in inside]


def models_in(namespace) -> list[tuple[str, object]]:
    """Usage: ``models_in(frame_locals(frame))`` -> ``[("model", LlamaForCausalLM(...))]``; the root models."""
    try:
        items = list(namespace.items())
    except Exception:  # a namespace that cannot be listed holds no model we can show
        return []
    return top_level_models([(str(k), v) for k, v in items if not str(k).startswith("__")])


def model_names(root) -> ModelNames:
    """Usage: ``model_names(model).names_of(layer)`` -> ``["model.layers.0"]``; all names, shared included."""
    inner, chain = unwrap_model(root)
    names: dict[int, list[str]] = {}
    classes: dict[str, int] = {}
    try:
        items = list(inner.named_modules(remove_duplicate=False))
    except TypeError:  # an old or custom named_modules without remove_duplicate
        items = list(inner.named_modules())
    for name, module in items:
        entry = names.setdefault(id(module), [])
        if name not in entry:
            entry.append(name)
            if len(entry) == 1:
                cls = type(module).__name__
                classes[cls] = classes.get(cls, 0) + 1
    wrappers = {id(w): kind for w, kind, _ in chain}
    return ModelNames(root=root, naming_root=inner, wrappers=wrappers, names=names, classes=classes)


def _pick_name(names: list[str], parent: str | None) -> str:
    if not names:
        return ""
    if parent is not None:
        prefix = parent + "." if parent else ""
        for name in names:
            if name.startswith(prefix) and name != parent:
                return name
    return names[0]


def _func_label(frame, module) -> str:
    code = frame.f_code
    owner = getattr(code, "co_qualname", code.co_name).rpartition(".")[0]
    if not owner or owner == type(module).__name__ or "<locals>" in owner:
        return code.co_name
    return f"{owner}.{code.co_name}"


def _wraps_callee(frame, callee) -> bool:
    """True when ``frame`` is a decorator's wrapper that called the function it closes over (``callee``)."""
    code = frame.f_code
    if not code.co_freevars or not (code.co_flags & 0x04):  # closures taking *args: decorator wrappers
        return False
    local_map = frame_locals(frame)
    for name in code.co_freevars:
        value = local_map.get(name)
        if callable(value) and code_of(value) is callee.f_code:
            return True
    return False


def _tree_of(module, roots: list[ModelNames]) -> tuple[int, str | None]:
    """The index of the root naming ``module`` (added when new) and its wrapper kind, if a wrapper."""
    for i, names in enumerate(roots):
        if module in names:
            return i, names.wrappers.get(id(module))
    inner, chain = unwrap_model(module)
    if chain:
        for i, names in enumerate(roots):
            if id(inner) in names.names:
                return i, chain[0][1]
    roots.append(model_names(module))
    return len(roots) - 1, roots[-1].wrappers.get(id(module))


def _renumber(entries: list[StackEntry], keep_first: bool) -> list[StackEntry]:
    """Number the models by first appearance on the stack; a root the user set stays 0."""
    order: dict[int, int] = {0: 0} if keep_first else {}
    for entry in entries:
        if entry.module is not None:
            order.setdefault(entry.module.tree, len(order))
    if all(k == v for k, v in order.items()):
        return entries
    out = []
    for entry in entries:
        if entry.module is not None:
            entry = replace(entry, module=replace(entry.module, tree=order[entry.module.tree]))
        out.append(entry)
    return out


def model_stack(stack, root=None) -> list[StackEntry]:
    """Usage: ``model_stack(pdb.stack, root=model)``; one ``StackEntry`` per frame, pdb's numbering."""
    roots: list[ModelNames] = []
    if root is not None and is_module(root):
        roots.append(model_names(root))
    parents: dict[int, str] = {}  # tree -> qualname of the innermost module frame so far
    entries = []
    for index, (frame, lineno) in enumerate(stack):
        code = frame.f_code
        module = _frame_self(frame)
        record = None
        if module is not None and is_forward_frame(frame, module):
            tree, wrapper = _tree_of(module, roots)
            names = roots[tree]
            all_names = tuple(names.names_of(module))
            qualname = "" if wrapper else _pick_name(list(all_names), parents.get(tree))
            if not wrapper:
                parents[tree] = qualname
            record = ModuleFrame(
                index=index, qualname=qualname, class_name=type(module).__name__,
                func=_func_label(frame, module), filename=code.co_filename, lineno=lineno,
                first_tensor=tensor_arg(frame), names=all_names, tree=tree, wrapper=wrapper, module=module)
        hidden = record is None and (is_plumbing(frame) or (
            index + 1 < len(stack) and _wraps_callee(frame, stack[index + 1][0])))
        entries.append(StackEntry(index=index, func=getattr(code, "co_qualname", code.co_name),
                                  filename=code.co_filename, lineno=lineno, hidden=hidden, module=record))
    return _renumber(entries, keep_first=bool(roots) and roots[0].root is root)


def module_frames(stack, root=None) -> list[ModuleFrame]:
    """Usage: ``module_frames(pdb.stack)``; the module rows only, outermost first."""
    return [e.module for e in model_stack(stack, root) if e.module is not None]
