"""``q`` at a stop that ``breakpoint()`` or ``llmpdb.set_trace()`` opened ends the program without a traceback.

Usage::

    quit_quietly()      # the debugger starts quitting (``set_quit``): a BdbQuit left uncaught is one line

pdb's quit raises ``bdb.BdbQuit`` into the program, so its ``finally`` blocks and ``atexit`` handlers run
(and a program or test runner that catches it, as pytest does, still can). Left uncaught it printed a
traceback through the debugger's own frames (bdb, llmpdb's trace functions). Here ``sys.excepthook`` is
wrapped once: a ``BdbQuit`` that reaches it prints ``llmpdb: quit`` on stderr and the program exits with
status 1, as after any uncaught exception; anything else goes to the hook that was there (the program's
own, or Python's). Under ``python -m llmpdb`` the runner catches the quit itself (``llmpdb: quit``, status
0); a rank under torchrun ends through ``llmpdb.ranks`` (status 3) before any hook runs.
"""

from __future__ import annotations

import bdb
import sys

__all__ = ["quit_quietly"]


class _QuitHook:
    """``sys.excepthook`` while llmpdb has quit: a BdbQuit is one line, the rest goes to ``previous``."""

    def __init__(self, previous):
        self.previous = previous

    def __call__(self, kind, value, tb):
        if isinstance(kind, type) and issubclass(kind, bdb.BdbQuit):
            stream = sys.stderr if sys.stderr is not None else sys.__stderr__
            try:
                print("llmpdb: quit", file=stream, flush=True)
            except Exception:  # stderr closed or full: the program ends all the same
                pass
            return None
        return self.previous(kind, value, tb)


def quit_quietly() -> None:
    """Usage: ``quit_quietly()``; wrap ``sys.excepthook`` (once) so that an uncaught BdbQuit is one line."""
    hook = sys.excepthook
    if isinstance(hook, _QuitHook):
        return
    sys.excepthook = _QuitHook(hook if callable(hook) else sys.__excepthook__)
