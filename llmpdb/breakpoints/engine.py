"""The parts every fast-breakpoint engine shares: delivery modes, the breakpoint-line cache, ``EngineBase``.

Usage::

    from llmpdb.breakpoints.engine import CONTINUE, WATCH, EngineBase, code_breakpoint_lines

The engines (``monitoring``, ``hooked``, ``trace``) subclass ``EngineBase``; the mixin (``mixin``) picks the
mode from pdb's stop state. See ``docs/design.md``, "Fast breakpoints".
"""

from __future__ import annotations

from inspect import CO_ASYNC_GENERATOR, CO_COROUTINE, CO_GENERATOR
from types import CodeType

__all__ = ["EngineBase", "code_breakpoint_lines", "identity", "ALL_LINES", "INVISIBLE_CODE_IDS", "GENERATOR_FLAGS",
           "STOCK", "CONTINUE", "WATCH", "OFF"]

identity = object.__hash__
"""``identity(obj)``: a key unique among live objects, like ``id(obj)``, but without the ``builtins.id`` audit
event that ``id()`` raises (one Python audit-hook call each, on hot paths, once any audit hook is installed)."""

GENERATOR_FLAGS = CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR

STOCK = "stock"        # pdb's own sys.settrace machinery
CONTINUE = "continue"  # only breakpoint lines matter
WATCH = "watch"        # stopframe/returnframe events and breakpoint lines
OFF = "off"            # nothing to deliver: no breakpoints while continuing, or quitting

ALL_LINES = frozenset({-1})
"""Marker: every line of the code object is checked (a function breakpoint's first line)."""

INVISIBLE_CODE_IDS: set[int] = set()
"""Code objects of the engine's own hooks: pdb never traces into them (``hooked``/``patching``)."""


def code_breakpoint_lines(code: CodeType, lines: frozenset[int]) -> frozenset[int]:
    """Usage: ``code_breakpoint_lines(func.__code__, frozenset({12, 40}))`` -> the breakpoint lines inside.

    Returns ``ALL_LINES`` when ``code.co_firstlineno`` is a breakpoint line (pdb checks a function
    breakpoint on every line of the function until its first executable line), else the breakpoint
    lines that some instruction of ``code`` itself belongs to (nested code objects answer for themselves).
    """
    if code.co_firstlineno in lines:
        return ALL_LINES
    own = {line for _, _, line in code.co_lines() if line is not None}
    return frozenset(own & lines)


class EngineBase:
    """What every engine shares: the per-code-object breakpoint-line cache and the problem list.

    A subclass sets ``self.pdb``, ``self.breaks`` (canonic file -> lines), ``self.code_lines`` and
    ``self.problems`` in its ``__init__`` and implements ``deactivate``."""

    def resume_quickly(self, mode: str, frame) -> bool:
        """Whether the engine can go on as armed after an event pdb did not stop at: same mode, the same
        breakpoint snapshot (``fb_breakpoint_lines`` returns one object until breakpoints change) and the
        same watched frames as at the last ``activate``; False means ``activate`` must plan."""
        key = self.key
        pdb = self.pdb
        if key is None or key[0] != mode or pdb.fb_breakpoint_lines() is not self.breaks:
            return False
        seen = self.watch_seen
        return mode != WATCH or (pdb.stopframe is seen[0] and pdb.returnframe is seen[1] and pdb.stoplineno == seen[2])

    watch_seen: tuple = (None, None, 0)  # (stopframe, returnframe, stoplineno) at the last WATCH ``activate``

    def take_problems(self) -> list[str]:
        """Problems met while arming (reported once by the debugger), then forgotten."""
        problems, self.problems = self.problems, []
        return problems

    def close(self) -> None:
        """End of the debugging run: same as ``deactivate``."""
        self.deactivate()

    def release_cleared(self) -> None:
        """Breakpoints were cleared at a prompt: release what only they needed, now (engines that change
        code or events per code object override it; the next ``activate`` plans as usual)."""

    def lines_for(self, code) -> frozenset[int]:
        """Breakpoint lines inside ``code`` (cached per code object; ``ALL_LINES`` for a function breakpoint)."""
        entry = self.code_lines.get(identity(code))
        if entry is not None and entry[0] is code:
            return entry[1]
        file_lines = self.breaks.get(self.pdb.canonic(code.co_filename))
        lines = code_breakpoint_lines(code, file_lines) if file_lines else frozenset()
        self.code_lines[identity(code)] = (code, lines)
        return lines
