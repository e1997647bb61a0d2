"""Module breakpoints: pause at the start of the ``forward`` of every module matching a name, glob or class.

Usage::

    engine = module_breakpoints()                 # the process's engine (kept across stops)
    bp = engine.add("model.layers.1.self_attn", [model], condition="hidden_states.shape[1] > 1")
    engine.add("LlamaMLP", [model], after=2, once=True)
    engine.breakpoints(); engine.remove(1); engine.clear()
    engine.restart()                              # the program runs again: every breakpoint pending again

The engine is this file (the breakpoints, arming them) with two parts of its own: ``new_modules`` (modules
and models made after a breakpoint was set) and ``breakpoint_stop`` (the pre-hook and the stop at run
time); ``module_breakpoint`` holds one breakpoint's record.

How it stops: a forward pre-hook is registered on each matching module only, so other modules keep
PyTorch's hook-free fast path and pay nothing. When a matching module is called, the pre-hook waits for
that module's ``forward`` code to start (decorators looked through; ``one_shot_monitor``: a local
``PY_START`` event on that code on 3.12+, a one-shot trace function on 3.11), evaluates CONDITION there,
with the arguments as locals, and hands the frame to the debugger (``llmpdb.hooks.set_trace(frame,
header=...)``), which stops on the forward's first line. The wait ends as soon as the forward starts.

Patterns: a qualified name from the root (``model.layers.1.self_attn``; a dotted suffix is enough:
``layers.1.self_attn``), a glob (``layers.*.mlp``, ``*self_attn``; ``*`` stays within one dotted part,
``**`` crosses dots) or a class name (``LlamaAttention``, ``*Attention``). A leading name the root is
bound to (``model.model.layers.1`` when the root is ``model``) is accepted.

Pending breakpoints (``add(..., pending=True)``): a pattern that matches nothing yet waits, like gdb's
pending breakpoints, even before ``import torch``. A class pattern arms on matching modules as they are
created; any pattern arms on the first model not seen before whose forward runs (``pending.RootWatch``,
installed only while something is pending: on 3.12+ a hook on each module not yet looked at, else a
global forward pre-hook). Two roots whose matches
have the same name (two copies of a model) are told apart by the names given with the roots:
``student.model.layers.1.mlp``, ``teacher.model.layers.1.mlp``.

Modules created after arming are found through torch's module-registration hook: a module attached
to a known model makes the next module call (one, via a one-shot global pre-hook) re-match; a new
module elsewhere is checked against class patterns only (a verdict kept per class); re-registering a
known module (``self.layers[:n]`` at every forward) costs two dict lookups. Measured in
``bench/module_breakpoints_bench.py``: a breakpoint armed elsewhere costs a tiny Llama ``generate()``
0.7-1.5% (2.4% before the per-class verdict); one on a module called every step, with a false condition,
5.5-7.5% (3.11-3.13, about 70 us a call: a no-op pre-hook behind ``dynamo.disable`` is 16 us of it, the
rest is Python run cold in the middle of a forward, several times its cost when timed alone; it was
23% on 3.12 and 3.13 with the trace function, which instruments every code object run meanwhile); while
a breakpoint is pending, on 3.12+ what a breakpoint armed elsewhere costs once each model has run (0-4%,
within the noise of that row), on 3.11 8-15% (the global pre-hook: torch leaves its hook-free fast path,
4-9% with a no-op hook, plus one dict lookup); with nothing pending no global hook is installed.
"""

from __future__ import annotations

import weakref
from typing import Callable

from ..inspect.modules import is_module
from ..inspect.module_match import ModuleMatch, NoModuleMatch, is_glob, match_modules, near_names
from ..session import SESSION
from .arming import register_pre_hook, remove_after_imports
from .breakpoint_names import labelled
from .breakpoint_stop import BreakpointStops, default_stopper
from .module_breakpoint import ModuleBreakpoint
from .new_modules import OWNER, NewModuleWatch
from .one_shot_monitor import forget_waits
from .pending import RootWatch

__all__ = ["ModuleBreakpoint", "ModuleBreakpointEngine", "ModuleMatch", "NoModuleMatch", "match_modules",
           "module_breakpoints", "near_names", "is_glob"]


class ModuleBreakpointEngine(NewModuleWatch, BreakpointStops):
    """Module breakpoints of one process. ``stopper(frame, header)`` opens the debugger (tests swap it)."""

    def __init__(self, stopper: Callable[[object, str], None] | None = None):
        self.stopper = stopper or default_stopper
        self._bps: dict[int, ModuleBreakpoint] = {}
        self._next = 1
        self._armed: dict[int, tuple[object, object, set[int]]] = {}  # id -> (weakref, handle, numbers)
        self._registration = None
        self._rematch = None
        self._roots = RootWatch(self._on_new_root, lambda exc: self._report("root watch", exc))  # while pending
        self._known: dict[int, weakref.ref] = {}  # id -> weak reference: the modules under the roots
        self._class_bps: dict[type, tuple] = {}  # module class -> the breakpoints whose class pattern it matches
        self.messages: list[str] = []  # problems met while running (a condition that raised...)
        self._codes: dict[int, tuple[object, object]] = {}  # id(forward) -> (forward, its code): ``_code``

    def _report(self, where: str, exc: BaseException) -> None:
        """Keep the problem for the next stop (a stop note prints it) and for the listing; the program goes on."""
        line = f"break-module {where} failed: {type(exc).__name__}: {exc} (the program continues)"
        self.messages.append(line)
        del self.messages[:-50]

    def take_messages(self) -> list[str]:
        """Usage: ``engine.take_messages()``; the problems met since the last call (then forgotten)."""
        messages, self.messages = self.messages, []
        return messages

    # ---- public API --------------------------------------------------------------------------------
    def breakpoints(self) -> list[ModuleBreakpoint]:
        return [self._bps[n] for n in sorted(self._bps)]

    def add(self, pattern: str, roots, condition: str | None = None, after: int = 0, once: bool = False,
            aliases=(), names=(), pending: bool = False) -> ModuleBreakpoint:
        """Arm a breakpoint; raises ``NoModuleMatch`` (with near names) or ``SyntaxError`` (condition).

        ``names`` are the variables the ``roots`` are bound to (same order; they tell two copies of a model
        apart). With ``pending`` a pattern that matches nothing waits for a module created later or a
        model whose forward runs later (``bp.pending``); without it only a class pattern with no model
        may wait."""
        pairs = [(r, n) for r, n in zip(roots, list(names) + [""] * len(roots)) if is_module(r)]
        roots = [r for r, _ in pairs]
        code = compile(condition, "<break-module condition>", "eval") if condition else None
        if not pattern.strip():
            raise NoModuleMatch(pattern, [])
        matches = match_modules(pattern, roots, aliases)
        near: list[str] = []
        if not matches:
            near = near_names(pattern, roots)
            if not pending and (roots or "." in pattern):
                raise NoModuleMatch(pattern, near)
        bp = ModuleBreakpoint(self._next, pattern, condition or None, max(0, int(after)), once, code=code,
                              roots=[weakref.ref(r) for r in roots], aliases=tuple(aliases), near=tuple(near))
        self._next += 1
        self._bps[bp.number] = bp
        self._class_bps.clear()
        labels, bp.root_names = labelled(matches, {id(r): n for r, n in pairs if n})
        for module, label in labels:
            self._arm(module, bp, label)
        self._remember(roots)
        self._watch_registrations()
        return bp

    def remove(self, number: int) -> ModuleBreakpoint:
        bp = self._bps.pop(number)
        self._class_bps.clear()
        for module_id in list(self._armed):
            ref, handle, numbers = self._armed[module_id]
            numbers.discard(number)
            if not numbers:
                handle.remove()
                del self._armed[module_id]
        if not self._bps:
            self._unwatch()
            self._known.clear()
            remove_after_imports(OWNER)
            forget_waits()  # a forward waited for (3.12+) stops being watched
        self._update_root_watch()
        return bp

    def restart(self) -> int:
        """Usage: ``engine.restart()`` when the program starts again (``run``/``restart``); the modules it built
        are gone, so every breakpoint is pending again, as pdb's line breakpoints survive a restart: it arms on
        the new models as they are created (class patterns) or as their forward first runs. Counts are kept
        (pdb keeps hit counts). Returns how many breakpoints wait again."""
        for _, handle, _ in self._armed.values():
            handle.remove()
        self._armed.clear()
        self._known.clear()
        forget_waits()
        self._unwatch()  # the root watch forgets the models it saw; installed again below
        for bp in self._bps.values():
            bp.labels.clear()
            bp.roots = []
            bp.root_names = {}
        if self._bps:
            self._watch_registrations()
        return len(self._bps)

    def clear(self) -> int:
        count = len(self._bps)
        for number in list(self._bps):
            self.remove(number)
        return count

    # ---- arming --------------------------------------------------------------------------------------
    def _arm(self, module, bp: ModuleBreakpoint, label: str) -> bool:
        bp.labels.setdefault(id(module), label)
        entry = self._armed.get(id(module))
        if entry is not None and entry[0]() is module:
            entry[2].add(bp.number)
            return False
        handle = register_pre_hook(module, self._pre_hook)
        self._armed[id(module)] = (weakref.ref(module), handle, {bp.number})
        return True


def module_breakpoints() -> ModuleBreakpointEngine:
    """Usage: ``module_breakpoints().add(...)``; the engine kept in the session (survives every stop)."""
    return SESSION.memory("module-breakpoints", ModuleBreakpointEngine)
