"""Pending module breakpoints: show each model llmpdb has not seen once, at its first call.

Usage::

    watch = RootWatch(on_root, on_error)   # on_root(module, args) for a module not seen before
    watch.install(torch.nn.modules.module, scan=True)   # while some breakpoint is pending
    watch.mark(model.modules())         # modules already matched: their calls cost nothing more
    watch.forget()                      # a seen model got a new submodule: look at it again
    watch.remove()                      # nothing pending: nothing of this is left in torch

A breakpoint whose pattern matches nothing yet (a model built later, a script's first line) waits for
the first module call of a model llmpdb has not seen: the outermost module of a call is the first one
whose hook runs, so ``on_root`` gets the root model (``LlamaForCausalLM``, not its layers). Once looked
at, every module of that model is marked seen. Two ways to see the first call:

- **Python 3.12+, one hook on each unseen module** (``mode == "modules"``): a forward pre-hook
  (``GuestHook``) on every module alive when the watch starts and not yet seen (found by type among the
  gc's objects, ``scan=True``; 90 ms for 370k objects) and on every module made after, told by
  ``module_births.ModuleBirths`` (``Module.__init__``, ``__setstate__``: built, deep-copied, unpickled).
  A model's hooks go once it has been looked at, so a model that runs keeps torch's hook-free fast path
  from its second call on; a model that never runs pays nothing.
- **3.11, or no free ``sys.monitoring`` tool id** (``mode == "global"``): a global forward pre-hook that
  turns seen modules away with one dict lookup; torch leaves its hook-free fast path for every module
  call while it is installed (``bench/module_breakpoints_bench.py``: 1.10x of a tiny Llama ``generate()``).

``torch.save(model)``, ``pickle`` and ``copy.deepcopy`` write the state ``Module.__getstate__`` returns:
llmpdb's hooks (these and a breakpoint's) are left out of it (``guest_hook.drop_guest_hooks``), so a
model saved or copied while a breakpoint is pending is the program's own; a module that pickles itself
through its own ``__reduce__`` (kernels hub's ``Func`` modules in transformers 5) is written with the
inert stand-ins. ``torch.jit.script(model)`` compiles every hook a module carries: these are taken off
while it reads them and put back after. A module armed by a breakpoint cannot be scripted while it is.

Inside a graph dynamo is tracing, ``torch.compiler.is_compiling()`` is a constant True, so either hook
folds away there and adds nothing to compiled code.
"""

from __future__ import annotations

import sys
import weakref

from .guest_hook import GuestHook, drop_guest_hooks
from .module_births import ModuleBirths, existing_modules

__all__ = ["RootWatch"]


def _is_compiling_function():
    compiler = sys.modules.get("torch.compiler")
    func = getattr(compiler, "is_compiling", None)
    return func if callable(func) else (lambda: False)


class RootWatch:
    """The watch of pending breakpoints; ``on_root(module, args)`` sees each new model once."""

    def __init__(self, on_root, on_error=None):
        self.on_root, self.on_error = on_root, on_error
        self.mode: str | None = None  # "modules" (3.12+), "global", None while not installed
        self._handle = None  # the global hook
        self._seen: dict[int, weakref.ref] = {}
        self._watched: dict[int, tuple[weakref.ref, object]] = {}  # id -> (module, its hook's handle)
        self._prune_at = 1024
        self._births = ModuleBirths(self._born, on_error, on_read=self._scripting,
                                    on_state=lambda module, state: drop_guest_hooks(state))
        self._lifted: dict[int, weakref.ref] = {}  # hooks taken off while torch.jit reads them
        self._is_compiling = lambda: False
        self._register = None  # torch's Module.register_forward_pre_hook (3.12+ mode)

    @property
    def installed(self) -> bool:
        return self.mode is not None

    def install(self, api, scan: bool = True) -> bool:
        """Usage: ``watch.install(sys.modules["torch.nn.modules.module"])``; True when newly installed.
        ``scan=False`` right after torch's module class was made (no module can exist yet)."""
        if self.mode is not None:
            return False
        self._is_compiling = _is_compiling_function()
        module_class = getattr(api, "Module", None)
        if module_class is not None and self._births.start(module_class):
            self.mode = "modules"
            self._register = module_class.register_forward_pre_hook  # torch's: never a subclass's override
            if scan:
                for module in existing_modules(module_class, self._births.holders):
                    if not self.seen(module):
                        self._watch(module)
            return True
        self._handle = api.register_module_forward_pre_hook(self._hook)
        self.mode = "global"
        return True

    def remove(self) -> None:
        self._births.stop()
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
        self._lifted.clear()
        watched, self._watched = self._watched, {}
        for _, handle in watched.values():
            handle.remove()
        self._seen.clear()
        self.mode = None

    def mark(self, modules) -> None:
        """Usage: ``watch.mark(model.modules())``; calls of these modules skip ``on_root``."""
        for module in modules:
            try:
                self._seen[id(module)] = weakref.ref(module)
            except TypeError:  # a module that refuses weak references: looked at again on each call
                continue
            entry = self._watched.pop(id(module), None)
            if entry is not None:
                entry[1].remove()

    def seen(self, module) -> bool:
        ref = self._seen.get(id(module))
        return ref is not None and ref() is module

    def forget(self) -> None:
        """Usage: ``watch.forget()``; look at every model again (one of them changed)."""
        seen, self._seen = self._seen, {}
        if self.mode == "modules":
            for ref in seen.values():
                module = ref()
                if module is not None:
                    self._watch(module)

    def _scripting(self, module, starting: bool) -> None:
        """``torch.jit.script`` compiles every hook of a module: the watch's is off while it reads them."""
        if starting:
            entry = self._watched.pop(id(module), None)
            if entry is not None and entry[0]() is module:
                entry[1].remove()
                self._lifted[id(module)] = entry[0]
        else:
            ref = self._lifted.pop(id(module), None)
            if ref is not None and ref() is module and self.mode == "modules" and not self.seen(module):
                self._watch(module)

    def _born(self, module) -> None:
        """A module made, deep-copied, unpickled, or ``Module.__init__`` run again on a live one (which gives
        it new hook dicts: an old first-call hook is gone with them)."""
        if self.seen(module):
            return
        entry = self._watched.pop(id(module), None)
        if entry is not None:
            entry[1].remove()
        self._watch(module)

    def _watch(self, module) -> None:
        """A first-call hook on ``module`` (3.12+ mode): it goes when the module is marked seen."""
        entry = self._watched.get(id(module))
        if entry is not None and entry[0]() is module:
            return
        try:
            ref = weakref.ref(module)
            handle = self._register(module, GuestHook(self._first_call, module))
        except Exception as exc:
            # Not watched. A ScriptModule refuses every hook (and no breakpoint can arm on it): nothing to
            # say. Anything else is said at the next stop, through the engine's messages.
            if self.on_error is not None and not type(module).__module__.startswith("torch.jit"):
                self.on_error(exc)
            return
        self._watched[id(module)] = (ref, handle)
        if len(self._watched) > self._prune_at:  # modules made and dropped (a temporary Sequential)
            self._watched = {key: entry for key, entry in self._watched.items() if entry[0]() is not None}
            self._prune_at = max(1024, 2 * len(self._watched))

    def _first_call(self, module, args):
        if self._is_compiling():  # constant-folded by dynamo: nothing of this runs in a compiled graph
            return None
        if self.seen(module):
            return None
        self._is_compiling = _is_compiling_function()  # installed while torch was still importing
        return self.on_root(module, args)

    def _hook(self, module, args):
        if self._is_compiling():  # constant-folded by dynamo: nothing of this runs in a compiled graph
            return None
        ref = self._seen.get(id(module))
        if ref is not None and ref() is module:
            return None
        self._is_compiling = _is_compiling_function()  # installed while torch was still importing
        return self.on_root(module, args)

