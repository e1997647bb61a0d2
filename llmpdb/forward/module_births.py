"""Every torch module made while a module breakpoint is pending, told as it is made (Python 3.12+).

Usage::

    births = ModuleBirths(on_birth, on_error, on_read, on_state)
    # on_birth(module): built, unpickled or copied; on_read(module, starting): torch.jit reads its hooks;
    # on_state(module, state): Module.__getstate__ returned the state pickle or copy will write
    births.start(torch.nn.Module)          # False where sys.monitoring is missing or no tool id is free
    births.stop()
    existing_modules(torch.nn.Module, holder_classes())   # the modules alive now (one walk of the gc's objects)

A module is made in one of two ways: ``Module.__init__`` (every constructor runs it through ``super()``)
or ``Module.__setstate__`` (``copy.deepcopy``, ``copy.copy``, ``pickle``/``torch.load`` of a whole model).
A ``PY_RETURN`` event on those two code objects only, on a ``sys.monitoring`` tool id of its own (4, else
3: the line engine takes 0 first, exception breakpoints 5), tells each one once its hook dictionaries
exist. No other code is instrumented, so the program pays nothing between births. Holders that cannot be
called (``ModuleList``, ``ModuleDict``: ``self.layers[:n]`` builds one at every forward) are not told.
A subclass whose ``__setstate__`` never calls ``Module.__setstate__``, or a module made with
``object.__new__`` and no ``__init__``, is not seen.

Two readers of a module's hook dicts must not find llmpdb's hooks there. ``pickle``/``copy.deepcopy``
write the state ``Module.__getstate__`` returns (a shallow copy of the module's ``__dict__``):
``on_state(module, state)`` runs as it returns, the place to replace the state's hook dicts with copies
without llmpdb's (not for ``copy.copy``, whose copy shares the module's hook dicts, as without llmpdb).
``torch.jit.script`` compiles every hook (``get_hook_stubs``), and llmpdb's cannot be compiled:
``on_read(module, True)`` runs as it starts on a module (the place to take a hook off),
``on_read(module, False)`` as it returns (to put it back). Where it raises (the program's own hooks
cannot be compiled either) nothing is put back: that module's first call goes unseen.
"""

from __future__ import annotations

import copy
import gc
import sys

from ..breakpoints.tool_ids import take_tool_id
from ..inspect.frames import frame_self

__all__ = ["ModuleBirths", "existing_modules", "can_call", "holder_classes"]

_MON = getattr(sys, "monitoring", None)
_SHALLOW_COPY = copy.copy.__code__
TOOL_NAME = "llmpdb-births"
_TOOL_IDS = (4, 3)


_HOLDERS = ("ModuleList", "ModuleDict", "ParameterList", "ParameterDict")


def holder_classes() -> tuple:
    """torch's containers that hold modules and are never called (``ModuleList``...), where torch is loaded."""
    container = sys.modules.get("torch.nn.modules.container")
    found = (getattr(container, name, None) for name in _HOLDERS)
    return tuple(cls for cls in found if isinstance(cls, type))


def can_call(cls, module_class, holders: tuple) -> bool:
    """Usage: ``can_call(type(module), torch.nn.Module, holder_classes())``; False for a holder that has no
    ``forward`` of its own. Anything else may be called, its ``forward`` set on the instance too
    (``torch.compile``'s ``OptimizedModule``, a bare ``nn.Module()`` given a ``forward``)."""
    unimplemented = module_class.__dict__.get("forward")
    return not (issubclass(cls, holders) and getattr(cls, "forward", None) is unimplemented)


def existing_modules(module_class, holders: tuple) -> list:
    """The modules alive now that may be called, found by type among the gc's objects (no attribute is read)."""
    found = []
    for obj in gc.get_objects():
        cls = type(obj)
        if issubclass(cls, module_class) and can_call(cls, module_class, holders):
            found.append(obj)
    return found


class ModuleBirths:
    """Calls ``on_birth(module)`` when ``Module.__init__`` or ``Module.__setstate__`` returns."""

    def __init__(self, on_birth, on_error=None, on_read=None, on_state=None):
        self.on_birth, self.on_error, self.on_read, self.on_state = on_birth, on_error, on_read, on_state
        self.tool: int | None = None
        self._codes: dict[int, object] = {}   # Module.__init__, Module.__setstate__
        self._state_code = None                # Module.__getstate__
        self._read_code = None                 # torch.jit's get_hook_stubs
        self._module_class = None
        self.holders: tuple = ()

    @property
    def running(self) -> bool:
        return self.tool is not None and _MON.get_tool(self.tool) == TOOL_NAME

    def start(self, module_class, holders: tuple | None = None) -> bool:
        """Usage: ``births.start(torch.nn.Module)``; True when watching (already or now). ``holders``: the
        classes never told (default: ``holder_classes()``)."""
        if self.running:
            return True
        if _MON is None:
            return False
        codes = [getattr(module_class.__dict__.get(name), "__code__", None) for name in ("__init__", "__setstate__")]
        if not all(codes):
            return False
        self.tool = take_tool_id(_TOOL_IDS, TOOL_NAME)
        if self.tool is None:
            return False
        self._module_class = module_class
        self.holders = holder_classes() if holders is None else tuple(holders)
        self._codes = {id(code): code for code in codes}
        _MON.register_callback(self.tool, _MON.events.PY_RETURN, self._returned)
        for code in codes:
            _MON.set_local_events(self.tool, code, _MON.events.PY_RETURN)
        state_code = getattr(module_class.__dict__.get("__getstate__"), "__code__", None)
        if self.on_state is not None and state_code is not None:
            self._state_code = state_code
            _MON.set_local_events(self.tool, state_code, _MON.events.PY_RETURN)
        recursive = sys.modules.get("torch.jit._recursive")
        read_code = getattr(getattr(recursive, "get_hook_stubs", None), "__code__", None)
        if self.on_read is not None and read_code is not None:
            self._read_code = read_code
            _MON.register_callback(self.tool, _MON.events.PY_START, self._read_started)
            _MON.set_local_events(self.tool, read_code, _MON.events.PY_START | _MON.events.PY_RETURN)
        return True

    def stop(self) -> None:
        tool, self.tool = self.tool, None
        codes, self._codes = self._codes, {}
        if tool is None or _MON.get_tool(tool) != TOOL_NAME:
            return  # never started, or the id was taken back from outside
        extra = [code for code in (self._state_code, self._read_code) if code is not None]
        self._state_code = self._read_code = None
        for code in [*codes.values(), *extra]:
            _MON.set_local_events(tool, code, 0)
        _MON.register_callback(tool, _MON.events.PY_RETURN, None)
        _MON.register_callback(tool, _MON.events.PY_START, None)
        _MON.free_tool_id(tool)

    def _returned(self, code, offset, retval):
        if code is self._state_code:
            if sys._getframe(2).f_code is not _SHALLOW_COPY:  # copy.copy shares the hook dicts: left alone
                self._tell(self.on_state, retval)
            return None
        if code is self._read_code:
            self._tell(self.on_read, False)
            return None
        if self._codes.get(id(code)) is not code:
            return None
        try:
            module = frame_self(sys._getframe(1))
            if module is not None and can_call(type(module), self._module_class, self.holders):
                self.on_birth(module)
        except Exception as exc:  # never into the program
            if self.on_error is not None:
                self.on_error(exc)
        return None

    def _read_started(self, code, offset):
        if code is self._read_code:
            self._tell(self.on_read, True)
        return None

    def _tell(self, listener, value) -> None:
        try:
            module = frame_self(sys._getframe(2))  # __getstate__(self), get_hook_stubs(nn_module)
            if module is not None:
                listener(module, value)
        except Exception as exc:  # never into the program
            if self.on_error is not None:
                self.on_error(exc)
