"""The person's terminal for a rank whose output torchrun hides (``--local-ranks-filter``, ``--redirects``, ``--tee``).

Usage::

    with prompt_terminal(debugger):      # around the rank's prompt
        debugger.interaction(frame, tb)

torchrun sends a filtered rank's output to ``/dev/null`` or a log file, but every worker keeps the
launcher's standard input, which is the terminal. When this rank's output is not a terminal and its
standard input is, the prompt and everything printed at it go to standard input's terminal device
(``os.ttyname(0)``): the debugger's ``stdout`` and, while the prompt is open, ``sys.stdout``, so that
``input()`` keeps its line editing (it uses readline only when both standard streams are terminals).
Both are put back when the prompt closes. Workers run in sessions of their own, without a controlling
terminal, so ``/dev/tty`` cannot be opened there; the device's name can.
"""

from __future__ import annotations

import contextlib
import os
import sys

from .headless import stream_is_terminal

__all__ = ["prompt_terminal", "hidden_output_terminal"]


def hidden_output_terminal(debugger) -> str | None:
    """Usage: ``hidden_output_terminal(pdb)`` -> ``"/dev/pts/3"`` when output is hidden but input is a terminal."""
    stdin = debugger.stdin if debugger.stdin is not None else sys.stdin
    if stream_is_terminal(debugger.stdout) or not stream_is_terminal(stdin):
        return None
    try:
        return os.ttyname(stdin.fileno())
    except (OSError, ValueError, AttributeError):
        return None


@contextlib.contextmanager
def prompt_terminal(debugger):
    """Route the debugger's output (and ``sys.stdout``) to the input's terminal while the prompt is open."""
    device = hidden_output_terminal(debugger)
    if device is None:
        yield
        return
    try:
        terminal = open(device, "w", encoding="utf-8", buffering=1)
    except OSError:
        yield
        return
    saved = debugger.stdout, sys.stdout
    debugger.stdout = terminal
    if saved[0] is sys.stdout:
        sys.stdout = terminal
    try:
        yield
    finally:
        debugger.stdout = saved[0]
        if sys.stdout is terminal:
            sys.stdout = saved[1]
        terminal.close()
