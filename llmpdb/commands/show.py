"""The ``show`` command: a tensor's values drawn — a 2-D heatmap, or a histogram.

Usage (at the prompt)::

    show attn_weights[0, 2]        a heatmap that fits the terminal (block means when larger)
    show causal_mask[0, 0]         masked positions (-inf / dtype minimum) drawn as their own glyph
    show hidden[0, -1]             a 1-D tensor: a histogram of its values
    show logits --hist --bins 20   a histogram of any tensor

Values are read (that is what ``show`` is for), on the tensor's device, under ``torch.no_grad``
(``inspect.heatmap``).
"""

from __future__ import annotations

import os
import shutil

from ._command import CommandError, command, parse_args, whole_number

__all__ = ["ShowCommands"]

MAX_ROWS = 40


_bins = whole_number(1, 1000)


def _terminal_rows() -> int:
    if os.environ.get("LINES", "").isdigit():
        return int(os.environ["LINES"])
    return shutil.get_terminal_size((100, 24)).lines


class ShowCommands:
    """Command mixin: ``show``."""

    @command
    def do_show(self, arg):
        """show EXPR [--hist] [--bins N]
        Draw a tensor's values: a 2-d tensor (or a 2-d slice: show attn_weights[0, 2]) as a heatmap that
        fits the terminal, block-averaged when larger, rows labelled with the tensor rows they cover and a
        legend of value ranges; masked values (-inf or the dtype's minimum, as in attention masks), NaN and
        +inf get glyphs of their own. Colour blocks on a colour terminal, the ramp ' .:-=+*#%@' without.
        A 1-d tensor, or --hist, draws a histogram of the values. Reads the values, on the tensor's device.
        --hist     a histogram instead of a heatmap (any number of dimensions)
        --bins N   histogram bins (default 10)
        Example: show attn_weights[0, 2]"""
        from ..inspect.heatmap import check_drawable, heat_grid, value_histogram
        from ..render.heatmap import render_heatmap, render_histogram

        args = parse_args(arg, self.do_show, flags={"--hist"}, options={"--bins": _bins})
        if not args.rest:
            raise CommandError("an expression is required (usage: show EXPR [--hist] [--bins N])")
        value = self.eval_in_frame(args.rest)
        hist = args.flag("--hist") or args.value("--bins") is not None
        try:
            check_drawable(value, args.rest, dims=tuple(range(1, 64)) if hist else (1, 2))
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        width, style = self.out_width(), self.out_style()
        if hist or len(value.shape) == 1:
            result = value_histogram(value, bins=args.value("--bins", 10))
            self.message(render_histogram(result, args.rest, width=width, style=style))
            return
        labels = len(str(int(value.shape[0]) - 1)) * 2 + 1
        rows = max(4, min(MAX_ROWS, _terminal_rows() - 8))
        grid = heat_grid(value, rows=rows, cols=max(8, width - labels - 2))
        self.message(render_heatmap(grid, args.rest, width=width, style=style))
