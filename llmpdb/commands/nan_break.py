"""The ``nan-break`` command: pause at the first module whose output or gradient holds NaN or Inf.

Usage (at the prompt)::

    nan-break            check every module's outputs from now on
    nan-break --blocks   check only the outputs of the model's blocks (layers, embeddings, norms, head):
                         cheaper, for a run left armed for hours
    nan-break --grad     check the gradients with respect to those outputs too (when backward runs)
    nan-break off        remove the checks

A module's hit turns the checks off; a block's hit stops in that block's call and checks the modules
inside it from then on (see ``llmpdb.forward.nan_break``).
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
    lines = [f"llmpdb: {m}" for m in engine.messages]
    if engine.failed > len(lines):
        lines.append(f"llmpdb: nan-break: {engine.failed - len(lines)} more checks failed before these")
    engine.messages, engine.failed = [], 0
    return lines


class NanBreakCommands:
    """Command mixin: ``nan-break``."""

    @command
    def do_nan_break(self, arg):
        """nan-break [--blocks] [--grad] [off]
        Pause at the first module whose output holds a NaN or an Inf: in that module's call (`self` is
        the module, `result` its output; `up` reaches the caller's forward), naming the module path and
        the tensor; then the checks are off. --blocks checks only the model's blocks (each layer, the
        embeddings, norms and head; cheaper, for long runs): the first bad block stops, the weights in
        it that hold a NaN/Inf are named, and from then on the modules inside it are checked, so its
        next call stops at the first bad one (a NaN a block swallows is not seen); on a GPU the block
        checks are read once per forward (one host sync), so that stop is at the end of the model's
        forward. --grad also checks, when backward runs, the gradient with respect to each checked
        output. One t.sum() per floating-point output tensor (this reads values). `nan-break off`
        removes the checks.
        Example: nan-break --blocks --grad"""
        from ..forward.nan_break import nan_breaks
        args = parse_args(arg, self.do_nan_break, flags={"--grad", "--blocks"})
        engine = nan_breaks()
        if args.rest == "off":
            was = engine.armed
            engine.disarm()
            self.message("nan-break: off" if was else "nan-break: was not armed")
            return
        if args.rest:
            raise CommandError(f"unexpected {args.rest!r} (usage: nan-break [--blocks] [--grad] [off])")
        torch_loaded = "torch.nn.modules.module" in sys.modules
        pairs, _ = self._nav_root_pairs() if torch_loaded else ([], None)
        engine.arm(grad=args.flag("--grad"), roots=[m for _, m in pairs], blocks=args.flag("--blocks"))
        when = "checking" if torch_loaded else "armed for when torch is imported: will check"
        if not engine.by_blocks:
            what = " and ".join(k for k, on in (("module outputs", engine.outputs), ("output gradients", engine.grads))
                                if on)
            text = (f"nan-break: {when} {what}; pauses at the first NaN/Inf, then turns off\n"
                    "  (`nan-break off` to remove; `nan-break --blocks` is cheaper, for long runs)")
        else:
            what = " and ".join(k for k, on in (("outputs", engine.outputs), ("output gradients", engine.grads))
                                if on)
            blocks = f"{engine.blocks} blocks" if engine.blocks else "the blocks of the first model called"
            then = "checks inside that block" if engine.outputs else "turns off"
            text = (f"nan-break: {when} the {what} of {blocks}; pauses at the first NaN/Inf,\n"
                    f"  then {then} (`nan-break off` to remove)")
        from ..render.table import wrap_lines
        self.message(wrap_lines(text, self.out_width()))
