"""What a stop does with no terminal: run the tour, then continue; never hang, never quit the program.

Usage: mixed into the debugger (``HeadlessMixin``); the tour is ``LLMPDB_TOUR`` (``;``-separated commands,
default ``shapes``, empty for none) or the ``headless_tour`` argument of ``Pdb``.

When standard input is not a terminal and runs out (a batch job, CI, a pipe that ran dry), pdb's
``EOF`` would quit and raise ``BdbQuit`` into the program; here the stop runs the tour and continues.
On a terminal, Ctrl-D keeps pdb's meaning.

Closed or unusable standard streams (``<&-``, ``>&-``, ``2>&-``, ``nohup``'s write-only stdin): before each
stop ``fit_streams`` points the debugger at what still works (``llmpdb.headless.streams``): output to stdout, else
stderr, else nowhere; commands from stdin when it can be read, else end of input at once. It says so once.
Output that is not a terminal goes through ``DroppingOutput``: a write that fails (a full disk) is dropped.
"""

from __future__ import annotations

import contextlib
import os
import sys

from .streams import NULL_OUTPUT, DroppingOutput, stop_streams, stream_is_terminal, writable

__all__ = ["HeadlessMixin", "DEFAULT_TOUR"]

DEFAULT_TOUR = "shapes"


class HeadlessMixin:
    """The tour at end of input without a terminal (``do_EOF``)."""

    _tour: list[str] | None = None
    _process_streams: tuple[bool, bool, bool] | None = None  # (stdin, stdout, use_rawinput) at first stop
    _streams_note_said = False

    def fit_streams(self) -> None:
        """Usage: ``debugger.fit_streams()`` before a stop; streams given to ``Pdb(stdin=, stdout=)`` stay."""
        if self._process_streams is None:
            out = self.stdout
            self._process_streams = (
                self.stdin is None or self.stdin is sys.stdin or self.stdin is sys.__stdin__,
                out is None or out is sys.stdout or getattr(out, "stream", None) is sys.stdout,
                bool(self.use_rawinput),
            )
        uses_stdin, uses_stdout, rawinput = self._process_streams
        streams = stop_streams(sys.stdin if uses_stdin else self.stdin,
                               sys.stdout if uses_stdout else self.stdout, sys.stderr)
        if uses_stdout and streams.output is not sys.stdout:
            self.stdout = streams.output
        elif uses_stdout and self.stdout is None:
            self.stdout = sys.stdout
        if uses_stdin:
            self.stdin = streams.input
        if (uses_stdout and not isinstance(self.stdout, DroppingOutput) and self.stdout is not NULL_OUTPUT
                and not stream_is_terminal(self.stdout)):
            self.stdout = DroppingOutput(self.stdout)  # a full disk drops llmpdb's text, never the program
        # input() needs sys.stdin, sys.stdout and sys.stderr; otherwise read lines from self.stdin. Without a
        # terminal for output input() has no line editing: the guarded stream shows the prompt the same way
        self.use_rawinput = (rawinput and streams.note is None and writable(sys.stdout)
                             and writable(sys.stderr) and not isinstance(self.stdout, DroppingOutput))
        if streams.note and not self._streams_note_said:
            self._streams_note_said = True
            self.message(streams.note)

    def stop_fit_streams(self, stop, proceed):
        """Stop stage ``streams``: point the debugger at the standard streams that still work."""
        self.fit_streams()
        return proceed()

    def _custom_completer(self):
        """pdb++ sets up line editing at each stop (pyrepl reads fd 0); without ``input()`` there is none."""
        if not self.use_rawinput:
            return contextlib.nullcontext()
        return super()._custom_completer()

    def reads_a_terminal(self) -> bool:
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
        if self.reads_a_terminal():
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
