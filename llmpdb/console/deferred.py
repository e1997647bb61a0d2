"""The first prompt of a process is drawn at once; the line editor loads while the user reaches for a key.

Usage::

    console = DeferredConsole(sys.stdin, sys.stdout, Console)   # what ``terminal_console()`` returns first
    line = console.read("(llmpdb) ", context)                    # as ``Console.read``

prompt_toolkit takes about 60-80 ms to import, more than the rest of llmpdb's start. At the first read,
``(llmpdb) `` is written straight away, the terminal is put in the mode prompt_toolkit reads it in (no
echo, no line buffering, Ctrl-C a key: ``raw_mode`` in ``prompt_toolkit.input.vt100``), and a thread
imports the editor while the main thread waits for the first key. When a key is there (it stays unread in
the terminal's queue, not echoed), the terminal's mode is put back, the cursor returns to the start of
the line, and prompt_toolkit draws the prompt again over the first one (in its split form, the space after
an invisible attribute reset: ``Console.read(drawn=True)``) and reads the key as it would have. So the
bytes ``(llmpdb) `` still reach the terminal once per read, and scripts that wait for them (pexpect) see
the prompt as soon as a person does.

Where the terminal's mode cannot be read (not a POSIX terminal) or the editor will not load, nothing is
deferred or the line is read plainly: the prompt is never lost and a key is never eaten.
"""

from __future__ import annotations

import sys
import threading
from typing import Callable

from .history import check_history, history_size

__all__ = ["DeferredConsole", "wait_for_first_key"]


def _load_editor() -> None:
    """Import what ``Console()`` and its first ``read`` need (run in a thread while the user types)."""
    try:
        import prompt_toolkit.shortcuts  # noqa: F401  the PromptSession and everything under it
        import prompt_toolkit.output.vt100  # noqa: F401
        import prompt_toolkit.styles  # noqa: F401
        from . import completion, keys, typeahead  # noqa: F401
    except Exception:  # the main thread's own import will raise it where it can be handled
        pass


def wait_for_first_key(prompt: str, stdin, stdout, meanwhile: Callable[[], None] = _load_editor) -> bool:
    """Usage: ``wait_for_first_key("(llmpdb) ", sys.stdin, sys.stdout)`` -> True when the prompt was drawn,
    ``meanwhile`` ran in a thread until it returned, and a key (or end of input) waits unread on ``stdin``;
    False, with nothing written, where the terminal's mode cannot be set (then nothing is deferred)."""
    try:
        import select
        import termios

        fd = stdin.fileno()
        before = termios.tcgetattr(fd)
    except Exception:  # not a POSIX terminal, or a stream with no descriptor
        return False
    waiting = [attr if not isinstance(attr, list) else list(attr) for attr in before]
    waiting[3] &= ~(termios.ECHO | termios.ICANON | termios.IEXTEN | termios.ISIG)
    waiting[0] &= ~(termios.IXON | termios.IXOFF | termios.ICRNL | termios.INLCR | termios.IGNCR)
    waiting[6][termios.VMIN] = 1
    loader = threading.Thread(target=meanwhile, name="llmpdb-console-load", daemon=True)
    try:
        termios.tcsetattr(fd, termios.TCSANOW, waiting)
    except Exception:  # the mode cannot be set: nothing is deferred, the editor loads and prompts as before
        return False
    try:
        stdout.write(prompt)
        stdout.flush()
        loader.start()
        while not select.select([fd], [], [], 1.0)[0]:
            pass
    finally:
        try:
            termios.tcsetattr(fd, termios.TCSANOW, before)
        except Exception:  # the terminal went away: prompt_toolkit's read ends the session as input() would
            pass
    if loader.is_alive():
        loader.join()
    stdout.write("\r")  # prompt_toolkit draws its prompt from the start of the line, over this one
    return True


class DeferredConsole:
    """``Console``'s ``read``, with the first prompt drawn before prompt_toolkit is imported."""

    def __init__(self, stdin, stdout, make_console: Callable):
        self.streams = (stdin, stdout)
        self._make_console = make_console
        self._console = None
        self._plain = False

    def read(self, prompt: str, context=None, colour: bool = True) -> str:
        """Usage: as ``Console.read``; EOFError on Ctrl-D, KeyboardInterrupt on Ctrl-C."""
        drawn = False
        if self._console is None and not self._plain:
            stdin, stdout = self.streams
            try:
                if history_size() > 0:
                    check_history()  # its warning, if any, comes before the prompt, as it did
            except Exception:  # the editor's own open_history says it again where it can
                pass
            drawn = wait_for_first_key(prompt, stdin, stdout)
            try:
                self._console = self._make_console(stdin, stdout)
            except Exception:  # prompt_toolkit refused this terminal: read plainly from now on
                self._plain = True
        if self._console is not None:
            return self._console.read(prompt, context, colour, drawn=drawn)
        return self._plain_read(prompt)  # over the first draw (the cursor is at the line's start)

    def _plain_read(self, prompt: str) -> str:
        stdin, stdout = self.streams
        stdout.write(prompt)
        stdout.flush()
        line = stdin.readline()
        if not line:
            raise EOFError
        return line.rstrip("\n").rstrip("\r")  # an Enter typed while the first prompt waited is a \r


def editor_loaded() -> bool:
    """Usage: ``editor_loaded()``; whether prompt_toolkit is imported in this process already."""
    return "prompt_toolkit" in sys.modules
