"""The ``nan-break`` command: pause at the first module whose output or gradient holds NaN or Inf.

Usage (at the prompt)::

    nan-break            check every module's outputs from now on
    nan-break --grad     check the gradients with respect to the outputs too (when backward runs)
    nan-break off        remove the checks

The first hit turns the checks off and stops in that module's call (see ``llmpdb.forward.nan_break``).
"""

from __future__ import annotations

import sys

from ..session import register_stop_note
from ._command import CommandError, command, parse_args

__all__ = ["NanBreakCommands"]


@register_stop_note
def nan_break_problems_note(frame, debugger) -> list[str]:
    """Checks that failed while the program ran (said once, at the next stop)."""
    module = sys.modules.get("llmpdb.forward.nan_break")
    if module is None:
        return []  # never imported: no nan-break was ever set, so none failed
    engine = module.nan_breaks()
    lines, engine.messages = [f"llmpdb: {m}" for m in engine.messages[-5:]], []
    return lines


class NanBreakCommands:
    """Command mixin: ``nan-break``."""

    @command
    def do_nan_break(self, arg):
        """nan-break [--grad] [off]
        Pause at the first module whose output holds a NaN or an Inf: in that module's call (`self` is
        the module, `result` its output; `up` reaches the caller's forward), naming the module path and
        the tensor. --grad also checks, when backward runs, the gradient with respect to each module's
        output. One fused isfinite(t).all() per floating-point output tensor (this reads values); the
        first hit turns the checks off. `nan-break off` removes them.
        Example: nan-break --grad"""
        from ..forward.nan_break import nan_breaks
        args = parse_args(arg, self.do_nan_break, flags={"--grad"})
        engine = nan_breaks()
        if args.rest == "off":
            was = engine.armed
            engine.disarm()
            self.message("nan-break: off" if was else "nan-break: was not armed")
            return
        if args.rest:
            raise CommandError(f"unexpected {args.rest!r} (usage: nan-break [--grad] [off])")
        torch_loaded = "torch.nn.modules.module" in sys.modules
        pairs, _ = self._nav_root_pairs() if torch_loaded else ([], None)
        engine.arm(grad=args.flag("--grad"), roots=[m for _, m in pairs])
        what = " and ".join(k for k, on in (("module outputs", engine.outputs), ("output gradients", engine.grads))
                            if on)
        when = "checking" if torch_loaded else "armed for when torch is imported: will check"
        from ..render.table import wrap_lines
        self.message(wrap_lines(f"nan-break: {when} {what}; pauses at the first NaN/Inf, then turns off\n"
                                "  (`nan-break off` to remove)", self.out_width()))
