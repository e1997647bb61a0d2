"""The ``grads`` command: every parameter's gradient norm, ``None`` grads, frozen ones, NaN/Inf.

Usage (at the prompt)::

    grads                  the root model's parameters, grouped by layer, and a one-line summary
    grads layers.1         only names with that dotted part (or suffix, or a glob: *proj.weight)
    grads --model EXPR     another model than the root
"""

from __future__ import annotations

from ._command import CommandError, command, parse_args

__all__ = ["GradsCommands"]


class GradsCommands:
    """Command mixin: ``grads``."""

    @command
    def do_grads(self, arg):
        """grads [PATTERN] [--model EXPR]
        Gradients per parameter, grouped by layer: norm, None grads (no backward yet), requires_grad=False
        (frozen) and NaN/Inf counts by layer (model.layers.0 ...), then one summary line: trainable / frozen
        / no grad yet / NaN-Inf / total norm. PATTERN keeps names with that dotted part or suffix, or
        matching a glob. Reads gradient values (one norm each), never parameter values.
        Example: grads layers.0 --model model"""
        from ..inspect.grads import grad_report
        from ..inspect.kinds import is_module
        from ..render.grads import render_grads
        args = parse_args(arg, self.do_grads, options={"--model": str})
        expr = args.value("--model")
        if expr:
            model = self.eval_in_frame(expr)
            if not is_module(model):
                raise CommandError(f"{expr} is a {type(model).__name__}, not a torch module")
        else:
            pairs, _ = self._nav_root_pairs()
            if not pairs:
                raise CommandError("no model in sight; give one: grads --model EXPR (or root-model EXPR)")
            if len(pairs) > 1:
                names = ", ".join(n or type(m).__name__ for n, m in pairs)
                raise CommandError(f"several models in sight ({names}): pick one with --model EXPR")
            model = pairs[0][1]
        report = grad_report(model, args.rest or None)
        if not report.groups and args.rest:
            raise CommandError(f"no parameter matches {args.rest!r}")
        self.message(render_grads(report, width=self.out_width(), style=self.out_style()))
