"""Entry points that open llmpdb: ``set_trace``, ``post_mortem`` and the ``breakpoint()`` hook.

Usage::

    import llmpdb; llmpdb.set_trace()           # stop here
    PYTHONBREAKPOINT=llmpdb.set_trace python x.py  # every breakpoint() opens llmpdb
    llmpdb.install()                            # same, from code (``python -m llmpdb`` does this)
    llmpdb.post_mortem(exc.__traceback__)

``PYTHONBREAKPOINT=0`` or ``LLMPDB_DISABLE=1`` turns every entry point into a no-op. One debugger
instance is reused per process, so breakpoints set at one stop are still there at the next.
"""

from __future__ import annotations

import os
import sys
import threading

from .forward.arming import dynamo_disable
from .breakpoints.muting import MUTING
from .session import SESSION
from .breakpoints.stop_gate import STOP_GATE

__all__ = ["set_trace", "post_mortem", "pm", "breakpointhook", "install", "uninstall", "disabled",
           "get_debugger", "set_debugger"]

_DEBUGGER = None
_CREATING = threading.RLock()


def disabled() -> bool:
    """Usage: ``if disabled(): return``; True under ``LLMPDB_DISABLE=1`` or ``PYTHONBREAKPOINT=0``, and once
    ``ide`` handed the process to another debugger (``SESSION.stood_down``)."""
    if SESSION.stood_down:
        return True
    return os.environ.get("LLMPDB_DISABLE", "") not in ("", "0") or os.environ.get("PYTHONBREAKPOINT") == "0"


def get_debugger(**kwargs):
    """Usage: ``get_debugger()``; the process's debugger, created on first use."""
    global _DEBUGGER
    with _CREATING:  # two threads at their first breakpoint() must not make two debuggers
        if _DEBUGGER is None:
            from .debugger.core import Pdb

            _DEBUGGER = Pdb(**kwargs)
    return _DEBUGGER


def set_debugger(debugger) -> None:
    """Usage: ``set_debugger(pdb)``; make ``debugger`` the one ``breakpoint()`` stops in (the CLI, tests)."""
    global _DEBUGGER
    _DEBUGGER = debugger


def set_trace(frame=None, *, header: str | None = None) -> None:
    """Usage: ``llmpdb.set_trace()``; stop in the caller's frame (or ``frame``)."""
    if disabled():
        return
    if frame is None:
        frame = sys._getframe().f_back
        if _muted_site(frame):
            return
    dynamo_disable(_stop)(frame, header)


def _muted_site(frame) -> bool:
    """True when `mute` silenced this breakpoint()/set_trace() site; else remember it for `mute HERE`."""
    if MUTING.skip(frame):
        return True
    MUTING.opened(frame)
    return False


def _stop(frame, header):
    debugger = get_debugger()
    STOP_GATE.reserve(getattr(debugger, "announce_wait", None))  # another thread's stop is shown to its end first
    if SESSION.stood_down:  # `ide` handed the process to another debugger while this thread waited its turn
        STOP_GATE.enter()
        STOP_GATE.leave()
        return
    if header is not None:
        debugger.fit_streams()  # stdout may be closed: the header goes where the stop will write
        debugger.message(_fitted(debugger, header))
    debugger.set_trace(frame)


def _fitted(debugger, header: str) -> str:
    """The stop's header wrapped to the debugger's width (a module path or a shape is never split)."""
    from .render.table import wrap_lines
    try:
        return wrap_lines(header, debugger.out_width())
    except Exception:  # a debugger without a width: the header as it is
        return header


def breakpointhook(*args, **kwargs) -> None:
    """The ``sys.breakpointhook`` llmpdb installs; defers to an explicit other ``PYTHONBREAKPOINT``."""
    if disabled():
        return
    other = os.environ.get("PYTHONBREAKPOINT", "")
    if other and other not in ("llmpdb.set_trace", "llmpdb.hooks.set_trace", "llmpdb.breakpointhook"):
        return sys.__breakpointhook__(*args, **kwargs)
    frame = sys._getframe().f_back
    if not _muted_site(frame):
        set_trace(frame, header=kwargs.get("header"))


def install() -> None:
    """Usage: ``llmpdb.install()``; make ``breakpoint()`` open llmpdb in this process."""
    sys.breakpointhook = breakpointhook


def uninstall() -> None:
    """Usage: ``llmpdb.uninstall()``; restore Python's default ``breakpoint()`` behaviour."""
    if sys.breakpointhook is breakpointhook:
        sys.breakpointhook = sys.__breakpointhook__


_TRACEBACK = BaseException.__dict__["__traceback__"]


def post_mortem(tb=None) -> None:
    """Usage: ``except Exception: llmpdb.post_mortem()``; debug the frame where the exception was raised.

    Outside an ``except`` block it debugs the last uncaught exception, as ``pdb.pm()`` does: the next
    cell of a notebook or IPython session after the one that failed (``sys.last_exc``, or
    ``sys.last_traceback`` before Python 3.12 and in IPython)."""
    if disabled():
        return
    if tb is None:
        tb = sys.exc_info()[2]  # the interpreter's own field: an exception's __traceback__ property never runs
    if tb is None:
        last = getattr(sys, "last_exc", None)
        tb = _TRACEBACK.__get__(last) if isinstance(last, BaseException) else getattr(sys, "last_traceback", None)
    if tb is None:
        raise ValueError("post_mortem() needs a traceback: call it while an exception is handled, or after "
                         "one went uncaught (a notebook's next cell)")
    debugger = get_debugger()
    debugger.reset()
    debugger.interaction(None, tb)


def pm() -> None:
    """Usage: ``llmpdb.pm()``; like ``pdb.pm()``: debug the last uncaught exception (``sys.last_exc``, or
    ``sys.last_traceback``), the cell that failed in IPython or a notebook, whatever is being handled now."""
    if disabled():
        return
    last = getattr(sys, "last_exc", None)
    tb = _TRACEBACK.__get__(last) if isinstance(last, BaseException) else getattr(sys, "last_traceback", None)
    if tb is None:
        raise ValueError("pm() needs an uncaught exception first: nothing has failed in this session yet")
    post_mortem(tb)


SESSION.stopper = lambda frame, header: set_trace(frame, header=header)  # forward hooks stop through this
