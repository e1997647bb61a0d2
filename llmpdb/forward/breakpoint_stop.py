"""The stop of a module breakpoint at run time (``ModuleBreakpointEngine``'s part).

Usage (a mixin of ``llmpdb.forward.breakpoints.ModuleBreakpointEngine``, which holds the state)::

    handle = register_pre_hook(module, self._pre_hook)   # armed on each matching module

At a call of an armed module the pre-hook counts it for each breakpoint and waits for the module's
``forward`` code to start (``one_shot_monitor``); there CONDITION is evaluated with the arguments as
locals (``_arrive``), and ``self.stopper(frame, header)`` opens the debugger on the forward's first line.
"""

from __future__ import annotations

import sys

from ..inspect.frames import frame_locals
from ..inspect.modules import code_of
from ..session import SESSION
from .breakpoint_names import exception_line, stack_name
from .module_breakpoint import ModuleBreakpoint, guarded
from .one_shot import hook_caller
from .one_shot_monitor import one_shot

__all__ = ["BreakpointStops", "default_stopper"]


def default_stopper(frame, header: str) -> None:
    """Open the process's debugger (``SESSION.stopper``, which ``llmpdb.hooks`` installs)."""
    SESSION.open_debugger(frame, header)


class BreakpointStops:
    """``_pre_hook`` (the forward pre-hook on armed modules), ``_code``, ``_arrive``."""

    @guarded
    def _pre_hook(self, module, args, caller=None):
        entry = self._armed.get(id(module))
        if entry is None or entry[0]() is not module:
            return None
        pending = []
        for number in sorted(entry[2]):
            bp = self._bps.get(number)
            if bp is None:
                continue
            bp.calls += 1
            if bp.code is None:
                bp.hits += 1
                if bp.hits <= bp.after:
                    continue
            pending.append(bp)
        if pending:
            code = self._code(module)
            one_shot(module, code, lambda frame: self._arrive(module, frame, pending),
                     caller or hook_caller(sys._getframe(1)), on_error=lambda exc: self._report("stop", exc)).install()
        return None

    def _code(self, module):
        """The code the module's ``forward`` runs (decorators looked through), kept by the forward's
        identity: unwrapping transformers' decorators costs a few microseconds at every call."""
        try:
            forward = vars(module).get("forward") or type(module).forward
        except TypeError:
            forward = type(module).forward
        entry = self._codes.get(id(forward))
        if entry is not None and entry[0] is forward:
            return entry[1]
        code = code_of(forward)
        if len(self._codes) > 1000:
            self._codes.clear()
        self._codes[id(forward)] = (forward, code)
        return code

    def _arrive(self, module, frame, pending: list[ModuleBreakpoint]) -> None:
        fired = []
        notes = []
        for bp in pending:
            if bp.number not in self._bps:
                continue
            if bp.code is not None:
                try:
                    held = bool(eval(bp.code, frame.f_globals, frame_locals(frame)))
                except BaseException as exc:  # SystemExit, KeyboardInterrupt too: never into the program
                    held = True  # like pdb: a condition that raises stops, and says why
                    notes.append(f"condition {bp.condition!r} raised {exception_line(exc)}")
                if not held:
                    continue
                bp.hits += 1
                if bp.hits <= bp.after:
                    continue
            fired.append(bp)
        if not fired:
            return
        for bp in fired:
            bp.stops += 1
            if bp.once:
                self.remove(bp.number)
        bp = fired[0]
        name = stack_name(frame, module, bp.root_names) or bp.labels.get(id(module)) or type(module).__name__
        header = f"module breakpoint {bp.number}: {name} ({type(module).__name__}), hit {bp.hits}"
        if bp.condition:
            header += f", if {bp.condition}"
        if bp.once:
            header += " (once: now removed)"
        for note in notes:
            header += f"\n  {note}"
        self.stopper(frame, header)
