"""Shared plumbing for debugger commands.

Usage::

    class ShapesCommands:
        @command
        def do_shapes(self, arg):
            \"\"\"shapes [EXPR] [--stats]
            ...\"\"\"
            value = self.eval_in_frame(arg)        # CommandError on a bad expression
            self.message(render(...))

``@command`` isolates a command: a ``CommandError`` prints its one-line message, any other exception
prints one line naming the command and the exception, and the debuggee keeps running.
"""

from __future__ import annotations

import functools
import shlex
import traceback

__all__ = ["CommandError", "command", "split_args"]


class CommandError(Exception):
    """A user-facing, one-line error: bad arguments, a bad expression, nothing to show."""


def command(func):
    """Wrap a ``do_*`` method so no exception escapes into the debugger loop or the debuggee."""

    name = func.__name__[3:].replace("_", "-")

    @functools.wraps(func)
    def wrapper(self, arg):
        try:
            return func(self, arg)
        except CommandError as exc:
            self.error(f"{name}: {exc}")
        except KeyboardInterrupt:
            self.error(f"{name}: interrupted")
        except Exception as exc:  # an llmpdb bug must never kill the user's job
            where = traceback.extract_tb(exc.__traceback__)[-1]
            self.error(
                f"{name}: internal error {type(exc).__name__}: {exc} "
                f"(at {where.filename.rsplit('/', 1)[-1]}:{where.lineno}; the program is unaffected)"
            )
        return None

    wrapper.llmpdb_command = name
    return wrapper


def split_args(arg: str) -> list[str]:
    """Usage: ``split_args("x --stats")`` -> ``["x", "--stats"]``; shell-like, CommandError on bad quoting."""
    try:
        return shlex.split(arg or "")
    except ValueError as exc:
        raise CommandError(f"cannot parse arguments: {exc}") from None
