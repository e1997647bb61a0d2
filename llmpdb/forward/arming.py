"""Arming forward hooks safely: kept out of dynamo, and armed after an import that has not happened yet.

Usage::

    handle = register_pre_hook(module, hook)           # dynamo never traces into ``hook``
    fn = dynamo_disable(fn)                            # same, for any debugger function torch may call
    sys.meta_path.insert(0, AfterImport("torch.nn.modules.module", callback))

``AfterImport`` runs a callback right after a module is imported (torch not imported yet when a class
pattern is armed at a script's first line). llmpdb never imports torch itself: these only act when the
debuggee already did.
"""

from __future__ import annotations

import sys

from .guest_hook import GuestHook

__all__ = ["AfterImport", "after_import_pending", "dynamo_disable", "register_pre_hook", "remove_after_imports"]


def dynamo_disable(func):
    """Keep dynamo from tracing into ``func`` when torch is loaded (only then: llmpdb never imports torch)."""
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is None:
        return func
    try:
        return dynamo.disable(func)
    except Exception:  # an old or stripped torch: run undecorated, as pdb would
        return func


def register_pre_hook(module, hook):
    """Usage: ``handle = register_pre_hook(layer, hook)``; a forward pre-hook that dynamo leaves alone, on
    that module only (``GuestHook``: copies and saved models do not take it)."""
    return module.register_forward_pre_hook(GuestHook(dynamo_disable(hook), module))


def remove_after_imports(owner: str | None = None) -> None:
    """Usage: ``remove_after_imports("nan-break")``; drop that owner's pending ``AfterImport`` finders
    (every one without ``owner``)."""
    sys.meta_path[:] = [f for f in sys.meta_path
                        if not (isinstance(f, AfterImport) and (owner is None or f.owner == owner))]


def after_import_pending(owner: str) -> bool:
    """Usage: ``after_import_pending("break-module")``; whether that owner waits for an import already."""
    return any(isinstance(f, AfterImport) and f.owner == owner for f in sys.meta_path)


class _LoaderProxy:
    """Runs ``callback(module)`` right after the real loader executed the module."""

    def __init__(self, loader, callback):
        self._loader, self._callback = loader, callback

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        module.__loader__ = self._loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._loader
        self._callback(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


class AfterImport:
    """A one-shot ``sys.meta_path`` finder: call ``callback`` once the module ``name`` has been imported.
    ``owner`` (``"break-module"``, ``"nan-break"``) tells whose it is: each removes only its own."""

    def __init__(self, name: str, callback, owner: str = ""):
        self.name, self.callback, self.owner = name, callback, owner

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _LoaderProxy(spec.loader, self.callback)
                return spec
        return None
