"""Every torch module made while a module breakpoint is pending, told as it is made (Python 3.12+).

Usage::

    births = ModuleBirths(on_birth, on_error, on_script)  # on_birth(module): built, unpickled or copied;
                                           # on_script(module, starting): torch.jit reads its hooks
    births.start(torch.nn.Module)          # False where sys.monitoring is missing or no tool id is free
    births.stop()
    existing_modules(torch.nn.Module)      # the modules alive now (one walk of the gc's objects)

A module is made in one of two ways: ``Module.__init__`` (every constructor runs it through ``super()``)
or ``Module.__setstate__`` (``copy.deepcopy``, ``copy.copy``, ``pickle``/``torch.load`` of a whole model).
A ``PY_RETURN`` event on those two code objects only, on a ``sys.monitoring`` tool id of its own (4, else
3: the line engine takes 0 first, exception breakpoints 5), tells each one once its hook dictionaries
exist. No other code is instrumented, so the program pays nothing between births. Containers that cannot
be called (``ModuleList``, ``ModuleDict``: ``self.layers[:n]`` builds one at every forward) are not told.
A subclass whose ``__setstate__`` never calls ``Module.__setstate__``, or a module made with
``object.__new__`` and no ``__init__``, is not seen.

``torch.jit.script(module)`` compiles every hook the module carries, and llmpdb's cannot be compiled:
``on_script(module, True)`` runs as torch's ``get_hook_stubs`` starts on a module (the place to take a
hook off), ``on_script(module, False)`` as it returns (to put it back). Where it raises (the program's own
hooks cannot be compiled either) nothing is put back: that module's first call goes unseen.
"""

from __future__ import annotations

import gc
import sys

from ..inspect.frames import frame_self

__all__ = ["ModuleBirths", "existing_modules", "can_call"]

_MON = getattr(sys, "monitoring", None)
TOOL_NAME = "llmpdb-births"
_TOOL_IDS = (4, 3)


def can_call(cls, module_class) -> bool:
    """Usage: ``can_call(type(module), torch.nn.Module)``; False for a container with no ``forward``."""
    forward = getattr(cls, "forward", None)
    unimplemented = module_class.__dict__.get("forward")
    return forward is not None and forward is not unimplemented


def existing_modules(module_class) -> list:
    """The callable modules alive now, found by type among the gc's objects (no attribute is read)."""
    found = []
    for obj in gc.get_objects():
        cls = type(obj)
        if issubclass(cls, module_class) and can_call(cls, module_class):
            found.append(obj)
    return found


class ModuleBirths:
    """Calls ``on_birth(module)`` when ``Module.__init__`` or ``Module.__setstate__`` returns."""

    def __init__(self, on_birth, on_error=None, on_script=None):
        self.on_birth, self.on_error, self.on_script = on_birth, on_error, on_script
        self.tool: int | None = None
        self._codes: dict[int, object] = {}   # Module.__init__, Module.__setstate__
        self._script_code = None               # torch.jit's get_hook_stubs
        self._module_class = None

    @property
    def running(self) -> bool:
        return self.tool is not None and _MON.get_tool(self.tool) == TOOL_NAME

    def start(self, module_class) -> bool:
        """Usage: ``births.start(torch.nn.Module)``; True when watching (already or now)."""
        if self.running:
            return True
        if _MON is None:
            return False
        codes = [getattr(module_class.__dict__.get(name), "__code__", None) for name in ("__init__", "__setstate__")]
        if not all(codes):
            return False
        for tool in _TOOL_IDS:
            if _MON.get_tool(tool) is None:
                _MON.use_tool_id(tool, TOOL_NAME)
                self.tool = tool
                break
        else:
            return False
        self._module_class = module_class
        self._codes = {id(code): code for code in codes}
        _MON.register_callback(self.tool, _MON.events.PY_RETURN, self._returned)
        for code in codes:
            _MON.set_local_events(self.tool, code, _MON.events.PY_RETURN)
        recursive = sys.modules.get("torch.jit._recursive")
        script_code = getattr(getattr(recursive, "get_hook_stubs", None), "__code__", None)
        if self.on_script is not None and script_code is not None:
            self._script_code = script_code
            _MON.register_callback(self.tool, _MON.events.PY_START, self._script_started)
            _MON.set_local_events(self.tool, script_code, _MON.events.PY_START | _MON.events.PY_RETURN)
        return True

    def stop(self) -> None:
        tool, self.tool = self.tool, None
        codes, self._codes = self._codes, {}
        if tool is None or _MON.get_tool(tool) != TOOL_NAME:
            return  # never started, or the id was taken back from outside
        script_code, self._script_code = self._script_code, None
        for code in [*codes.values(), *([script_code] if script_code is not None else [])]:
            _MON.set_local_events(tool, code, 0)
        _MON.register_callback(tool, _MON.events.PY_RETURN, None)
        _MON.register_callback(tool, _MON.events.PY_START, None)
        _MON.free_tool_id(tool)

    def _returned(self, code, offset, retval):
        if code is self._script_code:
            self._tell_script(False)
            return None
        if self._codes.get(id(code)) is not code:
            return None
        try:
            module = frame_self(sys._getframe(1))
            if module is not None and can_call(type(module), self._module_class):
                self.on_birth(module)
        except Exception as exc:  # never into the program
            if self.on_error is not None:
                self.on_error(exc)
        return None

    def _script_started(self, code, offset):
        if code is self._script_code:
            self._tell_script(True)
        return None

    def _tell_script(self, starting: bool) -> None:
        try:
            module = frame_self(sys._getframe(2))  # get_hook_stubs(nn_module): past _returned/_started
            if module is not None:
                self.on_script(module, starting)
        except Exception as exc:  # never into the program
            if self.on_error is not None:
                self.on_error(exc)
