"""A hook llmpdb leaves on one module that stays on that module: copies and saved models do not take it.

Usage::

    handle = module.register_forward_pre_hook(GuestHook(hook, module))   # or register_forward_hook
    handle.remove()                                                       # as for any hook

A hook sits in the module's ``_forward_pre_hooks`` / ``_forward_hooks`` dict, and that dict goes where the
module goes. Without this wrapper a breakpoint armed on a model broke the program's own
``torch.save(model, path)`` and ``pickle.dumps(model)`` (the debugger's function cannot be pickled), and a
``copy.deepcopy(model)`` (a reference model, an EMA copy) kept llmpdb's hook after the breakpoint was
cleared. ``GuestHook``:

- runs ``hook`` only for the module it was registered on; called for another module (a deep copy, an
  unpickled copy, which carry the hook in their dicts) it removes itself from that module's hook dicts
  and does nothing, unless that dict is the owner's own (a shallow ``copy.copy`` shares the dicts);
- is not copied by ``copy.deepcopy`` (the copy's dict holds this same object, which leaves at its first
  call);
- pickles as an inert standard-library callable, ``functools.partial(sys.audit, "llmpdb.inert-hook")``,
  which returns None and changes nothing: a model saved whole while armed loads anywhere, without llmpdb,
  and runs as it would have (with one more no-op hook on the armed modules). Pickle has no way to leave an
  entry out of a dict it is writing; where llmpdb sees ``Module.__getstate__`` return (3.12+, while a
  breakpoint is pending: ``module_births``), ``drop_guest_hooks(state)`` leaves them out of the state.

It never looks at the module beyond identity and its ``__dict__`` (no attribute of the user's class runs).
"""

from __future__ import annotations

import functools
import sys
import weakref
from collections import OrderedDict

__all__ = ["GuestHook", "INERT_EVENT", "drop_guest_hooks"]

INERT_EVENT = "llmpdb.inert-hook"
_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks", "_forward_pre_hooks_with_kwargs",
               "_forward_hooks_with_kwargs", "_forward_hooks_always_called")


def _module_dict(module) -> dict | None:
    try:
        return object.__getattribute__(module, "__dict__")
    except (AttributeError, TypeError):
        return None


class GuestHook:
    """``hook`` for ``module`` only; see the module docstring."""

    __slots__ = ("hook", "owner", "__weakref__")

    def __init__(self, hook, module):
        self.hook = hook
        self.owner = weakref.ref(module)

    def __call__(self, module, *args, **kwargs):
        if self.owner() is module:
            return self.hook(module, *args, **kwargs)
        self._leave(module)
        return None

    def _leave(self, module) -> None:
        """Remove this hook from ``module``'s hook dicts, except those it shares with the owner."""
        mine = _module_dict(module)
        if mine is None:
            return
        owner = self.owner()
        theirs = _module_dict(owner) if owner is not None else None
        keys = set()
        for name in _HOOK_DICTS[:2]:
            hooks = mine.get(name)
            if not isinstance(hooks, dict):
                continue
            if theirs is not None and theirs.get(name) is hooks:
                continue
            for key, value in list(hooks.items()):
                if value is self:
                    del hooks[key]
                    keys.add(key)
        for name in _HOOK_DICTS[2:]:  # the flags torch keeps by hook id
            flags = mine.get(name)
            if keys and isinstance(flags, dict) and (
                    theirs is None or theirs.get(name) is not flags):
                for key in keys:
                    flags.pop(key, None)

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce_ex__(self, protocol):
        return functools.partial, (sys.audit, INERT_EVENT)


def drop_guest_hooks(state) -> None:
    """Usage: ``drop_guest_hooks(module.__getstate__())``; the state (a new dict, shallow) gets copies of its
    hook dicts without llmpdb's hooks, so pickle and ``copy`` write the module as the program made it. The
    module's own dicts are not touched."""
    if not isinstance(state, dict):
        return
    dropped = set()
    for name in _HOOK_DICTS[:2]:
        hooks = state.get(name)
        if isinstance(hooks, dict) and any(type(hook) is GuestHook for hook in hooks.values()):
            kept = [(key, hook) for key, hook in hooks.items() if type(hook) is not GuestHook]
            dropped.update(key for key, hook in hooks.items() if type(hook) is GuestHook)
            state[name] = type(hooks)(kept) if type(hooks) in (dict, OrderedDict) else OrderedDict(kept)
    for name in _HOOK_DICTS[2:]:
        flags = state.get(name)
        if dropped and isinstance(flags, dict) and any(key in flags for key in dropped):
            state[name] = OrderedDict((key, flag) for key, flag in flags.items() if key not in dropped)
