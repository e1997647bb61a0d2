"""``debug CODE``: a recursive llmpdb, with every llmpdb command, on the pdb++ and the standard base.

Usage: mixed into the debugger (``RecursiveDebugMixin``); at the prompt ``debug f(1)`` steps into
``f(1)`` at a ``((llmpdb)) `` prompt where ``shapes``, ``kv``, ``sm``... work; ``c`` or the end of the code
returns to the outer prompt.

pdb's ``debug`` builds a plain ``pdb.Pdb`` (no llmpdb commands), and pdb++'s reads ``_pdbpp_prompt``, which
llmpdb's prompt property never sets (``AttributeError``, then a post-mortem inside ``pdbpp.py``). Here the
recursive debugger is an instance of the debugger's own class, on the same streams, with pdb's own tracing
(the fast breakpoint engine stays the outer debugger's), and whatever the code raises, ``SystemExit`` and
``KeyboardInterrupt`` included, is one ``***`` line at the outer prompt.
"""

from __future__ import annotations

import sys
import traceback

__all__ = ["RecursiveDebugMixin"]


class RecursiveDebugMixin:
    """``do_debug`` that recurses into the same llmpdb class; the prompt gains a pair of brackets a level."""

    _llmpdb_depth = 0

    def debug_depth(self) -> int:
        return self._llmpdb_depth

    @property
    def prompt(self) -> str:
        text = super().prompt.strip()
        return "(" * self._llmpdb_depth + text + ")" * self._llmpdb_depth + " "

    @prompt.setter
    def prompt(self, value: str) -> None:  # base classes assign their own prompt: keep ours
        pass

    _llmpdb_child = None  # the recursive debugger while ``debug CODE`` runs

    def set_trace(self, frame=None, *args, **kwargs):
        """A ``breakpoint()`` reached inside ``debug CODE`` stops in the recursive debugger, whose stop it
        is: the outer one is at its prompt, and stopping it again would overwrite that stop's state."""
        if frame is None:
            frame = sys._getframe().f_back
        child = self._llmpdb_child
        if child is not None:
            return child.set_trace(frame, *args, **kwargs)
        return super().set_trace(frame, *args, **kwargs)

    def _recursive_debugger(self):
        child = type(self)(self.completekey, self.stdin, self.stdout, nosigint=True, readrc=False,
                           headless_tour=self._tour, width=self._width, color=self._color)
        child._llmpdb_depth = self._llmpdb_depth + 1
        child.use_rawinput = self.use_rawinput
        child.fast_breakpoints_enabled = False  # pdb's tracing inside; the outer engine is left as it is
        return child

    def do_debug(self, arg):
        """debug code
        Enter a recursive debugger that steps through the code argument (an expression or statement run in
        the current environment). The recursive debugger is llmpdb too: every llmpdb command works in it."""
        if not (arg or "").strip():
            self.error("debug: the code to step through is required, e.g. debug f(1)")
            return None
        frame = self.curframe
        local_map = getattr(self, "curframe_locals", None)
        if local_map is None:
            local_map = frame.f_locals
        outer_trace = sys.gettrace()
        sys.settrace(None)
        child = self._recursive_debugger()
        self.message("ENTERING RECURSIVE DEBUGGER")
        self._llmpdb_child = child
        try:
            sys.call_tracing(child.run, (arg, frame.f_globals, local_map))
        except (Exception, SystemExit, KeyboardInterrupt) as exc:
            self.error(traceback.format_exception_only(type(exc), exc)[-1].strip())
        finally:
            self._llmpdb_child = None
            sys.settrace(outer_trace)
        self.message("LEAVING RECURSIVE DEBUGGER")
        self.lastcmd = child.lastcmd
        return None
