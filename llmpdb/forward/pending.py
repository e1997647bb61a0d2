"""Pending module breakpoints: a global forward pre-hook that shows each new root model once.

Usage::

    watch = RootWatch(on_root)          # on_root(module, args, caller) for a module not seen before
    watch.install(torch.nn.modules.module)   # while some breakpoint is pending
    watch.mark(model.modules())         # modules already matched (their calls cost one dict lookup)
    watch.forget()                      # a seen model got a new submodule: look at it again
    watch.remove()                      # nothing pending: torch's hook-free fast path is back

A breakpoint whose pattern matches nothing yet (a model built later, a script's first line) waits for
the first module call of a model llmpdb has not seen: the outermost module of a call is the first one
whose pre-hook runs, so ``on_root`` gets the root model (``LlamaForCausalLM``, not its layers). Once
looked at, every module of that model is marked seen, so its later calls cost one dict lookup and a
weak-reference call. The hook is installed only while something is pending: with nothing pending torch
calls no global hook at all. Inside a graph dynamo is tracing, ``torch.compiler.is_compiling()`` is a
constant True, so the hook folds away there and adds nothing to compiled code.
"""

from __future__ import annotations

import sys
import weakref

__all__ = ["RootWatch"]


def _is_compiling_function():
    compiler = sys.modules.get("torch.compiler")
    func = getattr(compiler, "is_compiling", None)
    return func if callable(func) else (lambda: False)


class RootWatch:
    """The global forward pre-hook of pending breakpoints; ``on_root(module, args)`` sees each new model."""

    def __init__(self, on_root):
        self.on_root = on_root
        self._handle = None
        self._seen: dict[int, weakref.ref] = {}
        self._is_compiling = lambda: False

    @property
    def installed(self) -> bool:
        return self._handle is not None

    def install(self, api) -> bool:
        """Usage: ``watch.install(sys.modules["torch.nn.modules.module"])``; True when newly installed."""
        if self._handle is not None:
            return False
        self._is_compiling = _is_compiling_function()
        self._handle = api.register_module_forward_pre_hook(self._hook)
        return True

    def remove(self) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
        self._seen.clear()

    def mark(self, modules) -> None:
        """Usage: ``watch.mark(model.modules())``; calls of these modules skip ``on_root``."""
        for module in modules:
            try:
                self._seen[id(module)] = weakref.ref(module)
            except TypeError:  # a module that refuses weak references: looked at again on each call
                continue

    def seen(self, module) -> bool:
        ref = self._seen.get(id(module))
        return ref is not None and ref() is module

    def forget(self) -> None:
        """Usage: ``watch.forget()``; look at every model again (one of them changed)."""
        self._seen.clear()

    def _hook(self, module, args):
        if self._is_compiling():  # constant-folded by dynamo: nothing of this runs in a compiled graph
            return None
        ref = self._seen.get(id(module))
        if ref is not None and ref() is module:
            return None
        self._is_compiling = _is_compiling_function()  # installed while torch was still importing
        return self.on_root(module, args)
