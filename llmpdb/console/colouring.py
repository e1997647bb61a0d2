"""Colour at the prompt: source listings on the standard base, red ``***`` error lines, config warnings.

Usage: mixed into the debugger class in front of the core (``debugger._build_class``); nothing to call.

On the standard library base, ``l``/``ll``/``source`` and the stop's ``-> line`` are highlighted with
pygments (``render.source``) when ``out_style()`` has colour. pdb++ highlights them itself: when the base
has pdb++'s ``config`` with highlighting on, it is left alone, and text that already holds escape sequences
is never coloured again. ``error()`` prints ``*** message`` in the ``error`` role's colour. At the first
stop each warning about the config file (``config_file.take_warnings``) is printed once.
"""

from __future__ import annotations

from ..render.config_file import take_warnings
from ..render.source import highlight_line, highlight_lines

__all__ = ["ColourMixin"]


class ColourMixin:
    """Colour for what the base debugger prints."""

    def _base_highlights(self) -> bool:
        """pdb++ colours source lines itself when its config says so."""
        config = getattr(self, "config", None)
        return config is not None and (getattr(config, "highlight", False)
                                       or getattr(config, "use_pygments", False) is not False)

    def _colour_source(self) -> bool:
        return self.out_style().color and not self._base_highlights()

    def _print_lines(self, lines, *args, **kwargs):
        if self._colour_source():
            lines = highlight_lines(lines)
        return super()._print_lines(lines, *args, **kwargs)

    def format_stack_entry(self, frame_lineno, lprefix=": "):
        entry = super().format_stack_entry(frame_lineno, lprefix)
        if lprefix.strip() and self._colour_source():
            location, sep, source = entry.rpartition(lprefix)
            if sep:
                entry = location + sep + highlight_line(source)
        return entry

    def error(self, msg):
        style = self.out_style()
        if not style.color:
            return super().error(msg)
        print(style.error(f"*** {msg}"), file=self.stdout)
        return None

    def preloop(self):
        super().preloop()
        for line in take_warnings():
            self.message(self.out_style().warn(line))
