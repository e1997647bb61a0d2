"""Hooked code in and out of a 3.11 process: the registry of hooked code objects, the hook function
itself, loaders that hand out hooked code, and the audit hook that notices unhooked code.

Usage: used by ``hooked.HookEngine``; ``restore_all()`` gives every function its code back.
The hook function's code is registered in ``engine.INVISIBLE_CODE_IDS``, so pdb never traces into it.
"""

from __future__ import annotations

import functools
import gc
import sys
import threading
import types
from typing import Any

from .engine import INVISIBLE_CODE_IDS, identity
from .bytecode import instrument
from .interrupt import register_delivery

__all__ = ["REGISTRY", "HOOK_CODE", "hooked_tree", "restore_all", "LOADERS", "install_audit_hook",
           "fast_breakpoint_hook", "AUDIT_SINK", "dynamo_loaded", "is_dynamo_file", "dynamo_wrapped_code", "code_tree",
           "called_by_dynamo"]


class _Registry:
    """Process-wide: hooked code objects (``id -> (hooked, original)``) and the engine hooks report to."""

    def __init__(self):
        self.hooked: dict[int, tuple[types.CodeType, types.CodeType]] = {}
        self.patched: list[tuple[types.FunctionType, types.CodeType, types.CodeType]] = []
        self.untracked = False  # hooked code may sit in functions not in ``patched`` (closures, imports)
        self.active: Any = None  # the HookEngine hooks report to
        self.generation = 0

    def patch(self, func: types.FunctionType, hooked: types.CodeType) -> None:
        self.patched.append((func, hooked, func.__code__))
        func.__code__ = hooked


REGISTRY = _Registry()


def fast_breakpoint_hook() -> None:
    """Called by hooked code right before a line event of a breakpoint line."""
    engine = REGISTRY.active
    if engine is not None:
        engine.hit(sys._getframe(1))


HOOK_CODE = fast_breakpoint_hook.__code__
INVISIBLE_CODE_IDS.add(identity(HOOK_CODE))
register_delivery(fast_breakpoint_hook)


_DYNAMO_DIR = "/torch/_dynamo/"


def dynamo_loaded() -> bool:
    """Whether ``torch._dynamo`` (``torch.compile``) is imported: only then can code reach dynamo."""
    return "torch._dynamo" in sys.modules


def is_dynamo_file(filename: str) -> bool:
    """Whether ``filename`` is part of ``torch._dynamo`` (its wrappers call the compiled functions)."""
    return _DYNAMO_DIR in filename.replace("\\", "/")


def dynamo_wrapped_code(wrapper: types.FunctionType) -> types.CodeType | None:
    """The code of the function a ``torch.compile`` wrapper (a function of ``torch/_dynamo``) compiles.

    dynamo reads the wrapped function's bytecode (and inlines what it calls): a hook constant in it makes
    dynamo fail, so that code must stay unhooked. Only the wrapper's own ``__dict__`` is read."""
    wrapped = wrapper.__dict__.get("_torchdynamo_orig_callable")
    if type(wrapped) is types.MethodType:
        wrapped = wrapped.__func__
    return wrapped.__code__ if type(wrapped) is types.FunctionType else None


def called_by_dynamo(frame) -> bool:
    """Whether ``frame`` runs under ``torch.compile``: it or one of its callers is a ``torch/_dynamo`` frame."""
    walk = frame
    while walk is not None:
        if is_dynamo_file(walk.f_code.co_filename):
            return True
        walk = walk.f_back
    return False


def code_tree(code: types.CodeType):
    """Usage: ``for c in code_tree(code)``; ``code`` and every code object nested in it."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from code_tree(const)


def hooked_tree(code: types.CodeType, lines_of: Any, memo: dict, problems: list) -> types.CodeType | None:
    """``code`` with hooks in it and in every nested code object that needs them; None if nothing changed.

    A code object that needs hooks but cannot get them is reported in ``problems`` and left as it is
    (``lines_of`` still reports it: the trace engine covers it)."""
    key = identity(code)
    if key in memo:
        return memo[key][1]
    consts = list(code.co_consts)
    changed = False
    for i, const in enumerate(consts):
        if isinstance(const, types.CodeType):
            new = hooked_tree(const, lines_of, memo, problems)
            if new is not None:
                consts[i] = new
                changed = True
    if changed:
        REGISTRY.untracked = True  # functions made from the new constants are not in the patched list
    base = code.replace(co_consts=tuple(consts)) if changed else code
    lines = lines_of(code)
    new = None
    if lines:
        where = f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})"
        try:
            new = instrument(base, lines, fast_breakpoint_hook)
            if new is None:
                problems.append(f"{where} cannot be re-assembled with hooks: it is traced instead")
        except Exception as exc:  # an assembler limit on unusual bytecode: trace it, and say so
            problems.append(f"{where} is traced instead of hooked: {type(exc).__name__}: {exc}")
        if new is base:
            new = None  # no line event of those lines can fire in this code object
    if new is None and changed:
        new = base
    memo[key] = (code, new)
    if new is not None:
        REGISTRY.hooked[identity(new)] = (new, code)
        if dynamo_loaded():
            AUDIT_SINK.watch_code_reads(True)
    return new


def restore_all() -> int:
    """Usage: ``restore_all()``; give every function its original code back; returns how many changed."""
    if not REGISTRY.hooked:
        return 0
    restored = 0
    for func, hooked, original in REGISTRY.patched:
        if func.__code__ is hooked:
            func.__code__ = original
            restored += 1
    if REGISTRY.untracked:
        for obj in gc.get_objects():
            if type(obj) is types.FunctionType:
                entry = REGISTRY.hooked.get(identity(obj.__code__))
                if entry is not None and entry[0] is obj.__code__:
                    obj.__code__ = entry[1]
                    restored += 1
    REGISTRY.hooked.clear()
    REGISTRY.patched.clear()
    REGISTRY.untracked = False
    REGISTRY.generation += 1
    AUDIT_SINK.watch_code_reads(False)
    return restored


class _LoaderPatch:
    """While an engine is armed, source loaders hand out hooked code for files that hold breakpoints."""

    def __init__(self):
        from importlib import _bootstrap_external as external

        self.targets = [(cls, cls.__dict__["get_code"]) for cls in (external.SourceLoader,
                                                                     external.SourcelessFileLoader)]
        self.installed = False

    def install(self) -> None:
        if self.installed:
            return
        for cls, original in self.targets:
            cls.get_code = _make_get_code(original)
        self.installed = True

    def remove(self) -> None:
        if self.installed:
            for cls, original in self.targets:
                cls.get_code = original
            self.installed = False


def _make_get_code(original):
    def get_code(loader, fullname):
        code = original(loader, fullname)
        engine = REGISTRY.active
        if code is None or engine is None or not engine.hook_breaks:
            return code
        return engine.hook_loaded(code)

    get_code.__wrapped__ = original
    return get_code


LOADERS = _LoaderPatch()


def _audit(event: str, args: tuple) -> None:
    """Process-wide audit hook (installed once, on 3.11): code from a breakpoint file that is compiled or
    executed without hooks (``exec(compile(...))``, ``runpy``, unusual loaders) makes the engine trace."""
    if event != "exec" and event != "compile":
        return
    engine = REGISTRY.active
    if engine is None or not engine.hook_breaks:
        return
    try:
        if event == "exec":
            if isinstance(args[0], types.CodeType):
                engine.saw_unhooked(args[0].co_filename, args[0])
        elif isinstance(args[1], str):
            engine.saw_unhooked(args[1], None)
    except Exception as exc:  # an audit hook must never break the audited operation: report instead
        engine.problems.append(f"audit hook failed: {type(exc).__name__}: {exc}")


def _imported(args: tuple) -> None:
    """``torch._dynamo`` is being imported while code is hooked: from now on dynamo may read it."""
    name = args[0]
    if REGISTRY.hooked and type(name) is str and name.startswith("torch._dynamo"):
        AUDIT_SINK.watch_code_reads(True)


_READING = set()  # threads inside ``_code_read`` (it reads ``__code__`` itself, which is audited too)


def _code_read(args: tuple) -> None:
    """``function.__code__`` is read (audited before the value is taken): when ``torch._dynamo`` reads a
    hooked function's code to compile it, the function gets its original code back first, so dynamo reads
    that (it cannot read a hook: a function in ``co_consts``). The engine is told (``gave_dynamo``)."""
    func = args[0]
    if type(func) is not types.FunctionType or args[1] != "__code__":
        return
    thread = threading.get_ident()
    if thread in _READING:
        return
    _READING.add(thread)
    try:
        code = func.__code__
        entry = REGISTRY.hooked.get(identity(code))
        if entry is None or entry[0] is not code or not called_by_dynamo(sys._getframe(1)):
            return
        func.__code__ = entry[1]
        engine = REGISTRY.active
        if engine is not None:
            engine.gave_dynamo(entry[1])
    except Exception as exc:  # never break the read: report instead
        engine = REGISTRY.active
        if engine is not None:
            engine.problems.append(f"audit hook failed: {type(exc).__name__}: {exc}")
    finally:
        _READING.discard(thread)


_CODE_READ = property(None, lambda self, args: _code_read(args))


class _AuditSink:
    """What the audit hook writes to: the hook is ``functools.partial(setattr, AUDIT_SINK)``, C from end to
    end, so the thousands of uninteresting events (3.11 audits every ``frame.f_code``) cost no Python call:
    they land in the instance ``__dict__`` (emptied at every engine plan, so that it keeps nothing alive).
    Only ``exec``, ``compile`` and ``import`` (of a module not loaded yet), properties here, run Python;
    ``object.__getattr__`` too while hooked code and ``torch._dynamo`` are both in the process
    (``watch_code_reads``): dynamo must be handed original code."""

    exec = property(None, lambda self, args: _audit("exec", args))
    compile = property(None, lambda self, args: _audit("compile", args))
    locals()["import"] = property(None, lambda self, args: _imported(args))

    def forget(self) -> None:
        """Drop the arguments of the events seen since the last call."""
        self.__dict__.clear()

    @staticmethod
    def watch_code_reads(on: bool) -> None:
        """Run ``_code_read`` at each audited attribute read (on), or let them land in ``__dict__`` (off)."""
        if on != ("object.__getattr__" in _AuditSink.__dict__):
            if on:
                setattr(_AuditSink, "object.__getattr__", _CODE_READ)
            else:
                delattr(_AuditSink, "object.__getattr__")


AUDIT_SINK = _AuditSink()
_AUDIT = {"installed": False}


def install_audit_hook() -> None:
    """Install the audit hook once per process (audit hooks cannot be removed; it is idle while nothing is
    armed)."""
    if not _AUDIT["installed"]:
        sys.addaudithook(functools.partial(setattr, AUDIT_SINK))
        _AUDIT["installed"] = True
