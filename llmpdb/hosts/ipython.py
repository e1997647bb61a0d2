"""IPython/Jupyter: ``%load_ext llmpdb`` makes ``%debug`` and ``%pdb on`` open llmpdb.

Usage (in IPython or a notebook)::

    %load_ext llmpdb        # %debug, %pdb on and %debug STATEMENT now stop in llmpdb
    %unload_ext llmpdb      # back to IPython's own debugger
    llmpdb.pm()             # post-mortem of the last failure, with or without the extension

IPython asks its traceback handler's ``debugger_cls`` for a debugger (``InteractiveTB.debugger_cls()``),
then calls ``reset``, sets ``botframe`` and calls ``interaction(None, exc)``. The extension puts a
factory there that hands out the process's one llmpdb debugger (``llmpdb.hooks.get_debugger``), so
breakpoints set at one stop are still there at the next, whichever way it was entered. The exception
IPython hands to ``interaction`` on Python < 3.13 is turned into its traceback by the stop pipeline.
"""

from __future__ import annotations

__all__ = ["load_ipython_extension", "unload_ipython_extension", "debugger_factory"]

_SAVED = "_llmpdb_saved_debugger_cls"


def debugger_factory():
    """Usage: ``InteractiveTB.debugger_cls = debugger_factory``; the process's llmpdb debugger."""
    from ..hooks import get_debugger

    return get_debugger()


def load_ipython_extension(ipython) -> None:
    """``%load_ext llmpdb``: IPython's ``%debug`` and ``%pdb on`` open llmpdb from now on."""
    handler = ipython.InteractiveTB
    if handler.debugger_cls is debugger_factory:
        return
    setattr(handler, _SAVED, handler.debugger_cls)
    handler.debugger_cls = debugger_factory
    handler.pdb = None  # IPython keeps the debugger it made: the next %debug makes ours


def unload_ipython_extension(ipython) -> None:
    """``%unload_ext llmpdb``: IPython's own debugger again."""
    handler = ipython.InteractiveTB
    if handler.debugger_cls is not debugger_factory:
        return
    handler.debugger_cls = getattr(handler, _SAVED, None) or ipython.debugger_cls
    handler.pdb = None
