"""The person's terminal for a rank whose output torchrun hides (``--local-ranks-filter``, ``--redirects``, ``--tee``).

Usage::

    with prompt_terminal(debugger):      # around the rank's prompt
        debugger.interaction(frame, tb)
    message_on_terminal(debugger, text)  # a line between prompts (from the step watchdog's thread)

torchrun sends a filtered rank's output to ``/dev/null`` or a log file, but every worker keeps the
launcher's standard input, which is the terminal. When this rank's output is not a terminal and its
standard input is, the prompt and everything printed at it go to standard input's terminal device
(``os.ttyname(0)``): the debugger's ``stdout`` and, while the prompt is open, ``sys.stdout``, so that
``input()`` keeps its line editing (it uses readline only when both standard streams are terminals).
Both are put back when the prompt closes; the stream stays open for the next prompt. Workers run in sessions of their own, without a controlling
terminal, so ``/dev/tty`` cannot be opened there; the device's name can.
"""

from __future__ import annotations

import contextlib
import os
import sys

from ..headless.streams import stream_is_terminal

__all__ = ["prompt_terminal", "hidden_output_terminal", "message_on_terminal", "stderr_is_discarded"]

# One stream per device, open for the life of the process: line editors (pdb++'s pyrepl) keep the stdout
# they first prompted on, so a stream closed after one prompt would break the next.
_TERMINALS: dict[str, object] = {}


def hidden_output_terminal(debugger) -> str | None:
    """Usage: ``hidden_output_terminal(pdb)`` -> ``"/dev/pts/3"`` when output is hidden but input is a terminal."""
    stdin = debugger.stdin if debugger.stdin is not None else sys.stdin
    if stream_is_terminal(debugger.stdout) or not stream_is_terminal(stdin):
        return None
    try:
        return os.ttyname(stdin.fileno())
    except (OSError, ValueError, AttributeError):
        return None


def _terminal_stream(device: str | None):
    if device is None:
        return None
    if device not in _TERMINALS:
        try:
            _TERMINALS[device] = open(device, "w", encoding="utf-8", buffering=1)
        except OSError:
            return None
    return _TERMINALS[device]


@contextlib.contextmanager
def prompt_terminal(debugger):
    """Route the debugger's output (and ``sys.stdout``) to the input's terminal while the prompt is open."""
    device = hidden_output_terminal(debugger)
    if device is None:
        yield
        return
    terminal = _terminal_stream(device)
    if terminal is None:
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


def message_on_terminal(debugger, text: str) -> None:
    """Usage: ``message_on_terminal(pdb, text)``; ``debugger.message(text)``, on the terminal when output is
    hidden. Only the debugger's own stream is switched: ``sys.stdout`` belongs to the running program."""
    terminal = _terminal_stream(hidden_output_terminal(debugger))
    if terminal is None:
        debugger.message(text)
        return
    saved = debugger.stdout
    debugger.stdout = terminal
    try:
        debugger.message(text)
    finally:
        debugger.stdout = saved


def stderr_is_discarded() -> bool:
    """Usage: ``stderr_is_discarded()``; True when file descriptor 2 is ``/dev/null`` (torchrun's
    ``--local-ranks-filter`` sends a filtered rank's streams there) or closed: nobody reads this rank's log."""
    try:
        mine, null = os.fstat(2), os.stat(os.devnull)
    except OSError:
        return True
    return (mine.st_dev, mine.st_ino, mine.st_rdev) == (null.st_dev, null.st_ino, null.st_rdev)
