"""Module breakpoints: pause at the start of the ``forward`` of every module matching a name, glob or class.

Usage::

    engine = module_breakpoints()                 # the process's engine (kept across stops)
    bp = engine.add("model.layers.1.self_attn", [model], condition="hidden_states.shape[1] > 1")
    engine.add("LlamaMLP", [model], after=2, once=True)
    engine.breakpoints(); engine.remove(1); engine.clear()
    engine.restart()                              # the program runs again: every breakpoint pending again

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
created; any pattern arms on the first model not seen before whose forward runs (a global forward
pre-hook, ``pending.RootWatch``, installed only while something is pending). Two roots whose matches
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
a breakpoint is pending, 8-15% (the global pre-hook: torch leaves its hook-free fast path, 4-9% with a
no-op hook, plus one dict lookup); with nothing pending no global hook is installed.
"""

from __future__ import annotations

import functools
import sys
import weakref
from dataclasses import dataclass, field
from typing import Callable

from ..inspect.module_match import ModuleMatch, NoModuleMatch, class_matches, is_glob, match_modules, near_names
from ..inspect.frames import frame_locals
from ..inspect.module_compile import compiled_warning
from ..inspect.modules import code_of, is_module
from ..session import SESSION
from .breakpoint_names import exception_line, labelled, stack_name
from .arming import AfterImport, after_import_pending, register_pre_hook, remove_after_imports
from .one_shot import hook_caller
from .one_shot_monitor import forget_waits, one_shot
from .pending import RootWatch

_OWNER = "break-module"  # its AfterImport finder (nan-break has its own)

__all__ = ["ModuleBreakpoint", "ModuleBreakpointEngine", "ModuleMatch", "NoModuleMatch", "match_modules",
           "module_breakpoints", "near_names", "is_glob"]


@dataclass
class ModuleBreakpoint:
    """A break-module breakpoint; ``calls`` counts entered forwards, ``hits`` those where CONDITION held."""

    number: int
    pattern: str
    condition: str | None = None
    after: int = 0
    once: bool = False
    calls: int = 0
    hits: int = 0
    stops: int = 0
    labels: dict[int, str] = field(default_factory=dict)   # id(module) -> name shown at a stop
    code: object = field(default=None, repr=False)
    roots: list = field(default_factory=list, repr=False)  # weak references to the roots
    aliases: tuple[str, ...] = ()
    root_names: dict[int, str] = field(default_factory=dict)  # id(root) -> variable, when names collide
    near: tuple[str, ...] = ()         # closest names in the models in sight when it was set pending

    @property
    def module_count(self) -> int:
        return len(self.labels)

    @property
    def pending(self) -> bool:
        """Armed on no module yet: waits for a matching module to be created or a new model to run."""
        return not self.labels


def _default_stopper(frame, header: str) -> None:
    """Open the process's debugger (``SESSION.stopper``, which ``llmpdb.hooks`` installs)."""
    SESSION.open_debugger(frame, header)


_TORCH_MODULE = "torch.nn.modules.module"


def _guarded(method):
    """Run-time entry points (torch calls them inside the user's model): report failures, never raise."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:
            self._report(method.__name__.strip("_").replace("_", " "), exc)
            return None

    return wrapper


class ModuleBreakpointEngine:
    """Module breakpoints of one process. ``stopper(frame, header)`` opens the debugger (tests swap it)."""

    def __init__(self, stopper: Callable[[object, str], None] | None = None):
        self.stopper = stopper or _default_stopper
        self._bps: dict[int, ModuleBreakpoint] = {}
        self._next = 1
        self._armed: dict[int, tuple[object, object, set[int]]] = {}  # id -> (weakref, handle, numbers)
        self._registration = None
        self._rematch = None
        self._roots = RootWatch(self._on_new_root)  # installed while a breakpoint is pending
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
            remove_after_imports(_OWNER)
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

    def _torch_module_api(self):
        return sys.modules.get("torch.nn.modules.module")

    def _watch_registrations(self) -> None:
        """Install torch's module-registration hook (any breakpoint) and the root watch (a pending one);
        before ``import torch``, once torch's module class exists."""
        api = self._torch_module_api()
        if api is None:  # torch is not imported yet (a pattern set at the script's first line)
            if not after_import_pending(_OWNER):
                sys.meta_path.insert(0, AfterImport(_TORCH_MODULE, lambda module: self._watch_registrations(), _OWNER))
            return
        if self._registration is None and self._bps and hasattr(api, "register_module_module_registration_hook"):
            self._registration = api.register_module_module_registration_hook(self._on_register)
        self._update_root_watch()

    def _update_root_watch(self) -> None:
        """The global pre-hook exists exactly while some breakpoint is pending (and torch is loaded)."""
        api = self._torch_module_api()
        if any(bp.pending for bp in self._bps.values()):
            if api is not None and hasattr(api, "register_module_forward_pre_hook") and self._roots.install(api):
                self._roots.mark(self._known_modules())  # the models in sight matched nothing already
        else:
            self._roots.remove()

    def _unwatch(self) -> None:
        self._roots.remove()
        for attr in ("_registration", "_rematch"):
            handle = getattr(self, attr)
            if handle is not None:
                handle.remove()
                setattr(self, attr, None)

    @_guarded
    def _on_new_root(self, module, args):
        """The first call of a model not seen before, while a breakpoint is pending: match it as a root."""
        pending = [bp for bp in self.breakpoints() if bp.pending]
        self._roots.mark(module.modules())
        newly = False
        for bp in pending:
            matches = match_modules(bp.pattern, [module], bp.aliases)
            if not matches:
                continue
            bp.roots.append(weakref.ref(module))
            for match in matches:
                newly = self._arm(match.module, bp, match.label) and match.module is module or newly
            self._remember([module])
            shown = ", ".join(sorted(bp.labels.values())[:4]) + (", ..." if len(bp.labels) > 4 else "")
            self.messages.append(f"module breakpoint {bp.number}: {bp.pattern} was pending; armed on {shown} "
                                 f"when {type(module).__name__}'s forward ran")
            warning = compiled_warning(bp.pattern, [module], bp.aliases)
            if warning:
                self.messages.append(f"module breakpoint {bp.number}: {warning}")
        self._update_root_watch()
        if newly:  # its own pre-hook was registered too late for this call
            self._pre_hook(module, args, caller=hook_caller(sys._getframe(1)))
        return None

    def _on_register(self, parent, name, child):
        """A submodule was assigned: re-match at the next module call when it joins a known model.

        Costs two dict lookups for the re-registrations of known modules (``self.layers[:n]`` builds a new
        ModuleList of the same layers at every forward). A module attached outside the known models is
        checked only against class patterns (a verdict kept per class); if its parent joins a model later,
        that event re-matches. Run for every module registration in the process: it reports its failures
        as the ``_guarded`` entry points do, without their extra call."""
        try:
            if child is None or not self._bps:
                return None
            known = self._known
            ref = known.get(id(child))
            if ref is not None and ref() is child or self._roots.seen(child):
                return None
            if self._roots.seen(parent):  # a model already looked at grew: look at it again at its next call
                self._roots.forget()
            ref = known.get(id(parent))
            if ref is not None and ref() is parent:
                if self._rematch is None:
                    api = self._torch_module_api()
                    if api is not None:
                        self._rematch = api.register_module_forward_pre_hook(self._rematch_hook)
                return None
            # The parent too: a root model (LlamaForCausalLM) is never attached to anything, but it is the
            # parent of the submodules its __init__ assigns.
            for module in (child, parent):
                found = self._class_bps.get(type(module))
                if found is None:
                    found = self._class_matches(type(module))
                for bp in found:
                    if bp.number not in self._bps:
                        continue
                    was_pending = bp.pending
                    self._arm(module, bp, f"new {type(module).__name__}")
                    if was_pending:
                        self._update_root_watch()
        except Exception as exc:
            self._report("on register", exc)
        return None

    def _class_matches(self, cls: type) -> tuple:
        """The breakpoints whose pattern names ``cls`` (a class pattern), kept per class until the breakpoints
        change: ``self.layers[:n]`` registers the same layers again at every forward, which ran every
        pattern's match for every one of them (a breakpoint armed on another model cost a ``generate()`` 2%)."""
        found = self._class_bps.get(cls)
        if found is None:
            name = cls.__name__
            found = tuple(bp for bp in self.breakpoints() if class_matches(bp.pattern, name, is_glob(bp.pattern)))
            if len(self._class_bps) > 1000:
                self._class_bps.clear()
            self._class_bps[cls] = found
        return found

    def _known_modules(self) -> list:
        modules = [ref() for ref in self._known.values()]
        return [module for module in modules if module is not None]

    def _remember(self, roots) -> None:
        for root in roots:
            try:
                self._known[id(root)] = weakref.ref(root)
                for _, module in root.named_modules():
                    self._known[id(module)] = weakref.ref(module)
            except Exception as exc:  # a module that cannot be weakly referenced or walked
                self.messages.append(f"cannot watch {type(root).__name__}: {type(exc).__name__}: {exc}")

    @_guarded
    def _rematch_hook(self, module, args):
        if self._rematch is not None:
            self._rematch.remove()
            self._rematch = None
        newly = self.rematch()
        if id(module) in newly:  # its own hook was registered too late for this call
            self._pre_hook(module, args, caller=sys._getframe(1))
        return None

    def rematch(self) -> set[int]:
        """Arm modules created since the breakpoints were set; returns the ids newly armed."""
        newly: set[int] = set()
        for bp in self.breakpoints():
            roots = [r() for r in bp.roots]
            roots = [r for r in roots if r is not None]
            try:
                matches = match_modules(bp.pattern, roots, bp.aliases)
            except Exception as exc:  # a root that broke while the program ran: keep the old arming
                self.messages.append(f"break-module {bp.number}: re-match failed: {type(exc).__name__}: {exc}")
                continue
            for match in matches:
                if self._arm(match.module, bp, match.label):
                    newly.add(id(match.module))
            self._remember(roots)
        return newly

    # ---- at run time -----------------------------------------------------------------------------------
    @_guarded
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


def module_breakpoints() -> ModuleBreakpointEngine:
    """Usage: ``module_breakpoints().add(...)``; the engine kept in the session (survives every stop)."""
    return SESSION.memory("module-breakpoints", ModuleBreakpointEngine)
