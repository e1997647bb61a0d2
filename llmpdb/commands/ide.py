"""``ide``: hand a paused program to an IDE: debugpy listens on loopback and VS Code attaches to this stop.

Usage (at the prompt)::

    ide                       a free loopback port; wait up to 120 s for the IDE
    ide 5678 --timeout 600    that port, a longer wait (0: do not wait, the IDE attaches when it likes)
    ide 0.0.0.0:5678 --listen-public    beyond loopback (prefer an ssh -L tunnel)

The hand-off, in order: ``debugpy.listen`` (imported only now; a failure changes nothing and the stop goes
on); llmpdb stands down for the rest of the process (its breakpoints are cleared and listed, ``breakpoint()``
now calls ``debugpy.breakpoint()``, llmpdb's own stops no longer open: debugpy traces the program from here);
the VS Code attach configuration is printed; the stop waits for the IDE. Once it has attached, the IDE shows
this same stop: the thread is suspended in debugpy at the frame and line llmpdb stopped at, before that line
runs (pydevd's ``do_wait_suspend``; where that is unavailable, ``debugpy.breakpoint()`` stops at the next line
instead). When the IDE continues or steps, llmpdb's stop ends as after ``c`` (under torchrun the waiting
ranks resume as after ``c``). If no IDE comes within the timeout, or on Ctrl-C, the program continues under
debugpy, which keeps listening: attach later and pause, or let a ``breakpoint()`` stop it.
"""

from __future__ import annotations

import bdb
import os
import sys
import threading
import time

from ..identity import rank_suffix
from ..session import SESSION
from ._command import CommandError, command, parse_args

__all__ = ["IdeCommands", "DEFAULT_WAIT", "MAX_WAIT"]

DEFAULT_WAIT = 120.0
MAX_WAIT = 7 * 24 * 3600.0
_POLL = 0.05
_DISPATCH = frozenset({"dispatch_line", "dispatch_call", "dispatch_return", "dispatch_exception"})
_BDB_FILE = bdb.__file__
_LLMPDB_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _seconds(text: str) -> float:
    value = float(text)
    if not 0 <= value <= MAX_WAIT:  # also refuses nan
        raise ValueError(f"needs seconds from 0 to {int(MAX_WAIT)}")
    return value


def _import_debugpy():
    try:
        import debugpy
    except ImportError:
        raise CommandError("debugpy is not installed in this environment: pip install debugpy") from None
    return debugpy


class IdeCommands:
    """Command mixin: ``ide``."""

    @command
    def do_ide(self, arg):
        """ide [[HOST:]PORT] [--timeout SECONDS] [--listen-public]
        Hand this paused program to an IDE: debugpy listens on loopback (a free port unless PORT), the VS Code
        attach configuration is printed, and once VS Code attaches it shows this same stop (llmpdb stands
        down for the rest of the run: its breakpoints are cleared, breakpoint() then stops in the IDE). Waits
        --timeout seconds (default 120; 0: no wait) for the IDE, then the program continues under debugpy.
        A host other than loopback needs --listen-public; ssh -L PORT:127.0.0.1:PORT NODE reaches it safely.
        Example: ide 5678"""
        from .ide_config import attach_instructions, parse_listen_address  # socket, json: off the first prompt

        args = parse_args(arg, self.do_ide, flags={"--listen-public"}, options={"--timeout": _seconds})
        if len(args.words) > 1:
            raise CommandError("usage: ide [[HOST:]PORT] [--timeout SECONDS] [--listen-public]")
        try:
            host, port = parse_listen_address(args.rest, public=args.flag("--listen-public"))
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        debugpy = _import_debugpy()
        frame = self._ide_program_frame()
        state = SESSION.memory("ide", dict)
        close = getattr(self, "fast_breakpoints_close", None)
        if close is not None:  # before debugpy starts: on 3.12+ the engine holds sys.monitoring's DEBUGGER_ID,
            close()            # which debugpy needs; re-armed at the next `c` should listen fail
        if "address" in state:  # debugpy.listen() works once per process
            host, port = state["address"]
        else:
            try:
                host, port = debugpy.listen((host, port))
            except Exception as exc:  # port taken, adapter failed: nothing changed yet
                raise CommandError(f"debugpy could not listen on {host}:{port}: {type(exc).__name__}: {exc}") from None
            state["address"] = (host, port)
        cleared = self._ide_stand_down(debugpy)
        self.message(f"llmpdb{rank_suffix()}: debugpy listens on {host}:{port} (pid {os.getpid()}); llmpdb hands "
                     "this program to the IDE and stands down for the rest of the run")
        if cleared:
            self.message(f"llmpdb: breakpoints cleared (set them in the IDE): {', '.join(cleared)}")
        for line in attach_instructions(host, port, cwd=os.getcwd(), rank=rank_suffix().strip()):
            self.message(line)
        wait = args.value("--timeout", DEFAULT_WAIT)
        if not self._ide_wait(debugpy, wait):
            return 1
        self.message("llmpdb: the IDE attached; it shows this stop now (continue or step there)")
        self._ide_flush()
        _suspend_in_ide(debugpy, frame)
        return 1

    # ---- the steps ------------------------------------------------------------------------------------
    def _ide_program_frame(self):
        """The frame the program is stopped in: the ``frame`` argument of the bdb ``dispatch_*`` call this stop
        runs inside (a line, call, return or exception event). A post-mortem stop has none: refused."""
        if self.debug_depth():
            raise CommandError("finish `debug` first: ide hands over the program's own stop")
        walk = sys._getframe()
        while walk is not None:
            code = walk.f_code
            if code.co_name in _DISPATCH and code.co_filename == _BDB_FILE:
                frame = walk.f_locals.get("frame")
                if frame is not None:
                    return frame
            walk = walk.f_back
        raise CommandError("this stop is not inside the running program (a post-mortem stop: its frames have "
                           "finished), so there is nothing to run under an IDE")

    def _ide_stand_down(self, debugpy) -> list[str]:
        """Leave the thread's tracing to debugpy: no llmpdb breakpoint, stop or trace function from now on.

        ``debugpy.listen`` already replaced this thread's trace function and its frames' (pdb's); what is left
        is llmpdb's own state: breakpoints (cleared, listed), the fast engine (closed before listen, now off),
        the value pdb's trace function returns for the event this stop is in (None: the frame keeps
        debugpy's), later stops (``SESSION.stood_down``), and ``breakpoint()`` (``debugpy.breakpoint``)."""
        cleared = [f"{os.path.basename(bp.file)}:{bp.line}" for bp in _breakpoints() if bp]
        if cleared:
            self.clear_all_breaks()
        self.fast_breakpoints_enabled = False  # pdb's own decisions only; its trace function is gone
        self._set_stopinfo(self.botframe, None, -1)  # as `c` with no breakpoint: nothing left to stop at
        self.trace_dispatch = None  # bdb returns self.trace_dispatch as the frame's next local trace: None
        # leaves the frame with the one debugpy gave it
        SESSION.stood_down = "debugpy"
        sys.breakpointhook = debugpy.breakpoint
        _hide_llmpdb_from_debugpy()
        return cleared

    def _ide_wait(self, debugpy, seconds: float) -> bool:
        """True once an IDE attached and finished configuring; False after ``seconds`` or Ctrl-C."""
        if debugpy.is_client_connected():
            return True
        if seconds <= 0:
            self.message("llmpdb: not waiting (--timeout 0): the program continues under debugpy")
            return False
        self.message(f"llmpdb: waiting {seconds:g} s for the IDE to attach (Ctrl-C: continue without waiting)")
        self._ide_flush()
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                if debugpy.is_client_connected():
                    return True
                time.sleep(_POLL)
        except KeyboardInterrupt:
            self.message("llmpdb: stopped waiting: the program continues under debugpy, which keeps listening")
            return False
        self.message(f"llmpdb: no IDE attached within {seconds:g} s: the program continues under debugpy, which "
                     "keeps listening (attach, then pause)")
        return False

    def _ide_flush(self) -> None:
        try:
            self.stdout.flush()
        except (AttributeError, OSError, ValueError):
            pass


def _breakpoints() -> list:
    return list(bdb.Breakpoint.bpbynumber)


def _hide_llmpdb_from_debugpy() -> None:
    """Make pydevd skip llmpdb's own frames (a step in the IDE never lands in llmpdb's code), keeping the
    patterns debugpy set for itself."""
    try:
        import pydevd
        from _pydevd_bundle.pydevd_api import PyDevdAPI
    except ImportError:
        return
    py_db = pydevd.get_global_debugger()
    if py_db is None:
        return
    current = py_db.dont_trace_external_files
    start = tuple(getattr(current, "start_patterns", ()))
    end = tuple(getattr(current, "end_patterns", ()))
    PyDevdAPI().set_dont_trace_start_end_patterns(py_db, start + (_LLMPDB_DIR,), end)


def _suspend_in_ide(debugpy, frame) -> None:
    """Suspend this thread in debugpy at ``frame``'s current line, as a breakpoint there would, until the
    IDE continues or steps. Falls back to ``debugpy.breakpoint()`` (the next line) without pydevd's API."""
    try:
        import pydevd
        from _pydevd_bundle.pydevd_additional_thread_info import set_additional_thread_info
        from _pydevd_bundle.pydevd_comm_constants import CMD_SET_BREAK
    except ImportError:
        pydevd = None
    py_db = pydevd.get_global_debugger() if pydevd is not None else None
    if py_db is None or not hasattr(py_db, "do_wait_suspend"):
        debugpy.breakpoint()
        return
    thread = threading.current_thread()
    set_additional_thread_info(thread)
    py_db.set_trace_for_frame_and_parents(thread.ident, frame)
    py_db.set_suspend(thread, CMD_SET_BREAK)
    py_db.do_wait_suspend(thread, frame, "line", None)
