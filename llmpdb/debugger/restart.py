"""``run`` / ``restart`` at the prompt: restart the program under ``python -m llmpdb``, refuse elsewhere.

Usage: mixed into the debugger (``RestartMixin``); the command line sets ``restartable = True`` and catches
``RESTART`` around each run of the program (``llmpdb.cli.main``).

pdb's ``run`` raises ``pdb.Restart`` and counts on ``python -m pdb``'s loop to catch it. Where llmpdb was
opened by ``breakpoint()``, ``set_trace()`` or ``post_mortem()`` nothing catches it: the program died
with a traceback and a post-mortem inside ``pdb.py``. Here only a program that ``python -m llmpdb``
started restarts (as pdb does: same process, breakpoints kept, ``run ARGS`` sets ``sys.argv``; module
breakpoints, ``bm``, become pending again and arm on the models the new run builds); anywhere
else, from a stop in a thread other than the main one, and on one rank of a job of 2+ ranks (the others
would not restart with it), ``run`` is one clear line and the stop goes on.
"""

from __future__ import annotations

import shlex
import sys
import threading

from ..base import stdlib_pdb
from ..identity import world_size

__all__ = ["RestartMixin", "RESTART"]

RESTART = stdlib_pdb.Restart  # raised here, not by the base's do_run: pdb++ may hold another pdb module


class RestartMixin:
    """``do_run``/``do_restart`` that raise ``RESTART`` only where the command line catches it."""

    restartable = False  # True for the debugger ``python -m llmpdb`` runs the program under

    def do_run(self, arg):
        """run [args...]
        Restart the program, as pdb does, when it was started by `python -m llmpdb`: same process,
        breakpoints kept; with arguments they become the new sys.argv[1:]. Where llmpdb was opened by
        breakpoint(), set_trace() or post_mortem() it refuses (nothing could start the program again).
        "restart" is an alias for "run"."""
        if not self.restartable:
            self.error("run: cannot restart here: only a program started by `python -m llmpdb` can be "
                       "restarted (this stop came from breakpoint()/set_trace())")
            return None
        ranks = world_size()
        if ranks is not None and ranks > 1:
            self.error(f"run: cannot restart one rank of a {ranks}-rank job (the other ranks would not restart "
                       "with it): `q` ends every rank; then start the job again")
            return None
        if threading.current_thread() is not threading.main_thread():
            self.error(f"run: cannot restart from thread {threading.current_thread().name!r}: "
                       "only a stop in the main thread can restart the program")
            return None
        if arg:
            try:
                words = shlex.split(arg)
            except ValueError as exc:
                self.error(f"run: cannot split {arg!r}: {exc}")
                return None
            sys.argv[1:] = words
        engine = sys.modules.get("llmpdb.forward.breakpoints")  # never imported: no `bm` was ever set
        if engine is not None:
            engine.module_breakpoints().restart()  # new run, new modules: `bm` breakpoints wait again
        raise RESTART

    do_restart = do_run
