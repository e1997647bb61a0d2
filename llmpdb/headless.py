"""What a stop does with no terminal: run the tour, then continue; never hang, never quit the program.

Usage: mixed into the debugger (``HeadlessMixin``); the tour is ``LLMPDB_TOUR`` (``;``-separated commands,
default ``shapes``, empty for none) or the ``headless_tour`` argument of ``Pdb``.

When standard input is not a terminal and runs out (a batch job, CI, a pipe that ran dry), pdb's
``EOF`` would quit and raise ``BdbQuit`` into the program; here the stop runs the tour and continues.
On a terminal, Ctrl-D keeps pdb's meaning.
"""

from __future__ import annotations

import os
import sys

__all__ = ["HeadlessMixin", "DEFAULT_TOUR", "stream_is_terminal"]

DEFAULT_TOUR = "shapes"


def stream_is_terminal(stream) -> bool:
    """Usage: ``stream_is_terminal(sys.stdin)``; False for None, a closed stream or anything but a tty."""
    try:
        return bool(stream is not None and stream.isatty())
    except (ValueError, OSError, AttributeError):
        return False


class HeadlessMixin:
    """The tour at end of input without a terminal (``do_EOF``)."""

    _tour: list[str] | None = None

    def _stdin_is_terminal(self) -> bool:
        return stream_is_terminal(self.stdin if self.stdin is not None else sys.stdin)

    def _tour_commands(self) -> list[str]:
        if self._tour is not None:
            return list(self._tour)
        spec = os.environ.get("LLMPDB_TOUR", DEFAULT_TOUR)
        return [c.strip() for c in spec.split(";") if c.strip()]

    def do_EOF(self, arg):
        """EOF
        End of input. On a terminal (Ctrl-D) it quits like pdb. Without a terminal (a batch job, a pipe
        that ran out) it runs the tour (LLMPDB_TOUR, default "shapes") and continues the program."""
        if self._stdin_is_terminal():
            return super().do_EOF(arg)
        self.message("")
        if not self.initial_stop:
            for line in self._tour_commands():
                self.message(f"(llmpdb tour) {line}")
                if self.onecmd(line):
                    return 1
        self.message("llmpdb: no more input (no terminal); continuing")
        self.set_continue()
        return 1
