"""The plain prompt reads its lines with Python's own ``input()`` (GNU readline), not pdb++'s pyrepl.

Usage::

    with plain_input():        # around the base debugger's command loop, where the console cannot run
        super().cmdloop()

pdb++ loads pyrepl, which replaces ``builtins.input`` for the whole process. pyrepl draws the whole line
again at every key, so a long line costs the square of its length: a 3 KB paste at the plain prompt
(``LLMPDB_PROMPT=plain``) did not come back in minutes. While the plain prompt reads, ``input()`` is the one
pyrepl replaced (GNU readline where Python has it: a 100 KB line comes back), and pyrepl's comes back
afterwards, for the program. Completion at that prompt is the base debugger's, through GNU readline.
A rank of a distributed job keeps pyrepl: with readline the terminal's Ctrl-C would reach the launcher
(torchrun ends the job) instead of the rank's own "Ctrl-C again" (``llmpdb.ranks``).
"""

from __future__ import annotations

import builtins
import contextlib
import sys

__all__ = ["plain_input", "pyrepl_original_input", "cut_by_terminal", "CUT_MESSAGE"]

# Linux's terminal keeps at most 4095 characters of a line (and its newline) while it edits the line itself
# (canonical mode: a debugger given the terminal as its own stdin reads it with ``readline()``); the rest
# of a longer line is dropped, and running what is left would run another command than the one typed.
_CANONICAL_LINE = 4095 if sys.platform.startswith("linux") else None
CUT_MESSAGE = (f"the terminal cut this line at {_CANONICAL_LINE} characters (its limit for a line it edits "
               "itself): nothing was run; put the code in a file and exec it, or use the console")


def pyrepl_original_input():
    """Usage: ``pyrepl_original_input()``; the ``input`` pyrepl replaced when ``builtins.input`` is pyrepl's,
    else None."""
    module = sys.modules.get("pyrepl.readline")
    if module is None:
        return None
    current = builtins.input
    wrapper = getattr(module, "_wrapper", None)
    if wrapper is None or getattr(current, "__self__", None) is not wrapper:
        return None
    original = getattr(module, "_old_input", None)
    return original if callable(original) else None


def cut_by_terminal(line: str, stream) -> bool:
    """Usage: ``cut_by_terminal(line, self.stdin)``; True when ``line``, read with ``stream.readline()``
    from a terminal in canonical mode, is as long as the terminal lets a line be: its end was dropped."""
    if _CANONICAL_LINE is None or len(line) != _CANONICAL_LINE:  # longer: not from the terminal
        return False
    try:
        import termios

        return bool(termios.tcgetattr(stream.fileno())[3] & termios.ICANON)
    except (ImportError, OSError, ValueError, AttributeError, TypeError):  # not a terminal
        return False


@contextlib.contextmanager
def plain_input(completer=None):
    """While it lasts, ``input()`` is the one pyrepl replaced (nothing changes when pyrepl is not in
    place). ``completer`` (pdb++'s fancycompleter) is told to give plain text: readline shows no colour."""
    original = pyrepl_original_input()
    if original is None:
        yield
        return
    replaced = builtins.input
    config = getattr(completer, "config", None)
    saved = (getattr(config, "readline", None), getattr(config, "use_colors", None))
    try:
        import readline as gnu_readline  # what input() edits with; cmd's loop binds TAB there
    except ImportError:
        gnu_readline = None
    builtins.input = original
    try:
        if config is not None and gnu_readline is not None:
            config.readline = gnu_readline
            config.use_colors = False
        yield
    finally:
        builtins.input = replaced
        if config is not None:
            config.readline, config.use_colors = saved
