"""Module breakpoints meet modules and models made after they were set (``ModuleBreakpointEngine``'s part).

Usage (a mixin of ``llmpdb.forward.breakpoints.ModuleBreakpointEngine``, which holds the state)::

    self._watch_registrations()     # after add/restart: torch's module-registration hook, the root watch
    self.rematch()                  # arm the modules created since the breakpoints were set

torch's module-registration hook sees every submodule assigned in the process (``_on_register``): one
joining a known model makes the next module call re-match (``_rematch_hook``, a one-shot global pre-hook);
one elsewhere is checked against class patterns, with a verdict kept per class. While a breakpoint is
pending, the root watch (``pending.RootWatch``) shows each model not seen before at its first forward
(``_on_new_root``): on 3.12+ through a hook on each module not yet seen, else a global pre-hook.
Before ``import torch``, an ``AfterImport`` finder installs all this once torch's module class exists.
"""

from __future__ import annotations

import sys
import weakref

from ..inspect.module_compile import compiled_warning
from ..inspect.module_match import class_matches, is_glob, match_modules
from .arming import AfterImport, after_import_pending
from .module_breakpoint import guarded
from .one_shot import hook_caller

__all__ = ["NewModuleWatch", "OWNER", "TORCH_MODULE"]

OWNER = "break-module"  # its AfterImport finder (nan-break has its own)
TORCH_MODULE = "torch.nn.modules.module"


class NewModuleWatch:
    """The registration hook, the root watch and re-matching of ``ModuleBreakpointEngine``."""

    def _torch_module_api(self):
        return sys.modules.get(TORCH_MODULE)

    def _watch_registrations(self, fresh: bool = False) -> None:
        """Install torch's module-registration hook (any breakpoint) and the root watch (a pending one);
        before ``import torch``, once torch's module class exists (``fresh``: no module exists yet)."""
        api = self._torch_module_api()
        if api is None:  # torch is not imported yet (a pattern set at the script's first line)
            if not after_import_pending(OWNER):
                sys.meta_path.insert(0, AfterImport(TORCH_MODULE, lambda module: self._watch_registrations(True),
                                                    OWNER))
            return
        if self._registration is None and self._bps and hasattr(api, "register_module_module_registration_hook"):
            self._registration = api.register_module_module_registration_hook(self._on_register)
        self._update_root_watch(scan=not fresh)

    def _update_root_watch(self, scan: bool = True) -> None:
        """The root watch exists exactly while some breakpoint is pending (and torch is loaded)."""
        api = self._torch_module_api()
        if any(bp.pending for bp in self._bps.values()):
            if api is not None and hasattr(api, "register_module_forward_pre_hook") and not self._roots.installed:
                self._roots.mark(self._known_modules())  # the models in sight matched nothing already
                self._roots.install(api, scan=scan)
        else:
            self._roots.remove()

    def _unwatch(self) -> None:
        self._roots.remove()
        for attr in ("_registration", "_rematch"):
            handle = getattr(self, attr)
            if handle is not None:
                handle.remove()
                setattr(self, attr, None)

    @guarded
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
        as the ``guarded`` entry points do, without their extra call."""
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

    @guarded
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
