"""Run a function under a real llmpdb debugger fed with typed commands; return what it printed.

Usage::

    out = debug_transcript(func, ["c", "shapes", "c"], arg1, kw=2)

The debugger starts stopped at the call of ``func``; every ``breakpoint()`` inside stops the same
debugger. Output has no colour and is rendered at ``width`` (100) columns. When the commands run out the
program continues (no tour), so a short list never hangs a test.
"""

from __future__ import annotations

import io
import sys

from llmpdb import hooks
from llmpdb.debugger.core import Pdb

__all__ = ["debug_transcript", "make_debugger", "outputs_of", "after", "run_post_mortem", "explained"]


def make_debugger(commands: list[str], *, width: int | None = 100,
                  color: bool | None = False) -> tuple[object, io.StringIO]:
    """Usage: ``dbg, out = make_debugger(["shapes", "c"])``; a debugger on in-memory streams. ``width=None``
    / ``color=None`` leave the width and colour to the environment and the config file."""
    stdin = io.StringIO("\n".join(commands) + "\n")
    stdout = io.StringIO()
    debugger = Pdb(stdin=stdin, stdout=stdout, nosigint=True, readrc=False, headless_tour=[], width=width,
                   color=color)
    return debugger, stdout


def debug_transcript(func, commands: list[str], *args, width: int | None = 100, color: bool | None = False,
                     **kwargs) -> str:
    """Run ``func(*args, **kwargs)`` under llmpdb with ``commands`` as the typed input."""
    debugger, stdout = make_debugger(commands, width=width, color=color)
    previous, previous_hook = hooks._DEBUGGER, sys.breakpointhook
    hooks.set_debugger(debugger)
    hooks.install()
    try:
        debugger.runcall(func, *args, **kwargs)
    finally:
        debugger.clear_all_breaks()  # bdb keeps breakpoints in class-level lists shared by every debugger
        sys.settrace(None)
        hooks.set_debugger(previous)
        sys.breakpointhook = previous_hook
    return stdout.getvalue()


def outputs_of(transcript: str) -> list[str]:
    """Usage: ``outputs_of(debug_transcript(f, ["c", "shapes", "c"]))`` -> what each command printed after
    the first ``c`` (which runs to the first ``breakpoint()``)."""
    return [chunk.rstrip("\n") for chunk in transcript.split("(llmpdb) ")[2:]]


def after(out: str, command_index: int) -> str:
    """Usage: ``after(out, 2)`` -> what the third typed command printed (up to the next prompt)."""
    return out.split("(llmpdb) ")[command_index + 1]


def run_post_mortem(func, *args, **kwargs):
    """Call ``func``; an exception opens llmpdb's post-mortem (the way a user's ``except: llmpdb.post_mortem()``
    does). The exception's one-line text is kept in ``run_post_mortem.exception``."""
    import llmpdb

    try:
        func(*args, **kwargs)
    except Exception as exc:
        run_post_mortem.exception = f"{type(exc).__name__}: {exc}"
        llmpdb.post_mortem()


def explained(func, *args, width: int = 200) -> str:
    """Usage: ``explained(model, ids)`` -> what ``explain`` printed at the post-mortem of ``func(*args)``."""
    return outputs_of(debug_transcript(run_post_mortem, ["c", "explain", "c"], func, *args, width=width))[0]

