"""``catch`` / ``uncatch``: exception breakpoints, the IDE habit (``llmpdb/breakpoints/catching.py`` watches the raises).

Usage (at the prompt)::

    catch RuntimeError                      pause where a RuntimeError (or subclass) is raised
    catch *Error if "shape" in str(e)       a glob and a condition; e is the exception
    catch                                   list them with their hit counts
    uncatch 1 / uncatch all                 remove

The stop is in the raising frame, before any ``except`` runs: its locals are the ones that failed. ``c``
continues (the exception then goes on as it would have), ``n``/``s`` step on into the handler.
"""

from __future__ import annotations

import bdb
import sys

from ..breakpoints.catching import CATCHES, backend_name, valid_pattern
from ._command import CommandError, command, split_words

__all__ = ["CatchCommands"]


class CatchCommands:
    """Command mixin: ``catch``, ``uncatch``; the catch stop; re-arming after each stop (3.11)."""

    @command
    def do_catch(self, arg):
        """catch [PATTERN [if CONDITION]]
        Pause where an exception matching PATTERN is raised: in the raising frame, before any handler
        runs (an IDE's exception breakpoint). PATTERN is a class name or a glob over the names of the
        exception's classes (RuntimeError also catches its subclasses; *Error; torch.*). CONDITION is
        evaluated in the raising frame with the exception as e; one that raises stops and says so.
        Without arguments: list the exception breakpoints with their hits. uncatch N removes one.
        On 3.12+ sys.monitoring RAISE events cost nothing until something is raised; on 3.11 a trace
        function sees every call while a catch is set (bench/catch_bench.py measures it).
        Example: catch *Error if "shape" in str(e)"""
        text = (arg or "").strip()
        if not text:
            self._catch_list()
            return
        words = split_words(text)
        pattern, condition = words[0], None
        if len(words) > 1:
            if words[1] != "if" or len(words) < 3:
                raise CommandError("usage: catch PATTERN [if CONDITION]")
            condition = text.split(None, 1)[1].split(None, 1)[1].strip()
            try:
                compile(condition, "<catch condition>", "eval")
            except SyntaxError as exc:
                raise CommandError(f"invalid condition {condition!r}: {exc.msg}") from None
        if not valid_pattern(pattern):
            raise CommandError(f"bad pattern {pattern!r}: a class name or a glob such as *Error")
        CATCHES.stopper = self.catch_stop
        catch = CATCHES.add(pattern, condition)
        where = f" if {condition}" if condition else ""
        self.message(f"catch {catch.number}: {pattern}{where} (pauses where it is raised; {backend_name()})")

    @command
    def do_uncatch(self, arg):
        """uncatch N|all
        Remove exception breakpoint N (see catch for the numbers), or all of them; with none left,
        nothing watches raises any more.
        Example: uncatch 1"""
        text = (arg or "").strip()
        if text == "all":
            removed = CATCHES.remove()
        elif text.isdigit():
            removed = CATCHES.remove(int(text))
            if not removed:
                raise CommandError(f"no exception breakpoint {text} (catch lists them)")
        else:
            raise CommandError("usage: uncatch N|all")
        for catch in removed:
            self.message(f"removed catch {catch.number}: {catch.pattern}")

    def _catch_list(self) -> None:
        if not CATCHES.items:
            self.message("no exception breakpoints (catch PATTERN sets one)")
            return
        self.message("num  pattern                          hits")
        for catch in CATCHES.items:
            where = f" if {catch.condition}" if catch.condition else ""
            self.message(f"{catch.number:<4} {catch.pattern + where:<32} {catch.hits}")

    stop_exception: BaseException | None = None  # the exception of this catch stop

    def caught_exception(self):
        return self.stop_exception

    def catch_stop(self, frame, exc: BaseException, tb, catch, note: str | None) -> None:
        """Stop at ``frame`` where ``exc`` was just raised; afterwards pdb's stepping goes on from there."""
        if self.botframe is None:  # no session yet: the outermost frame is the bottom, as set_trace does
            bottom = frame
            while bottom.f_back is not None:
                bottom = bottom.f_back
            self.botframe = bottom
        self.message(f"catch {catch.number}: {type(exc).__name__}: {exc}  (raised here; no handler ran yet)")
        if note:
            self.message(f"*** {note}")
        self.stop_exception = exc  # `explain` names it; the traceback alone does not lead back to it
        try:
            self.interaction(frame, tb)
        finally:
            self.stop_exception = None
        if self.quitting:  # `q` at a catch stop: end the program, as at any other stop
            raise bdb.BdbQuit
        continuing = self.stopframe is self.botframe and self.stoplineno == -1
        if (continuing and not self.breaks) and not self.quitting:
            return
        walk = frame  # pdb steps on (or breakpoints wait): its trace function takes the frames from here
        while walk is not None:
            walk.f_trace = self.trace_dispatch
            walk.f_trace_lines = True
            if walk is self.botframe:
                break
            walk = walk.f_back
        sys.settrace(self.trace_dispatch)

    def set_trace(self, frame=None, *args, **kwargs):
        """3.11: frames the exceptions-only tracer took have line events off; pdb's set_trace gives them its
        trace function but not their line events, so the next line would never stop (a later
        ``breakpoint()`` ran through). Turn them back on for the frames pdb now traces."""
        if frame is None:
            frame = sys._getframe().f_back
        result = super().set_trace(frame, *args, **kwargs)
        walk = frame
        while walk is not None:
            if walk.f_trace is not None:
                walk.f_trace_lines = True
            walk = walk.f_back
        return result

    def stop_catch(self, stop, proceed):
        """Stop stage ``catch``: the user's commands at the prompt raise too: never a catch stop there."""
        CATCHES.paused += 1
        try:
            return proceed()
        finally:
            CATCHES.paused -= 1
            CATCHES.rearm()

    def event_catch(self, frame, event, arg):
        """Event consumer ``catch``: a raise in a frame pdb traces (the one you stopped in, or while stepping;
        pdb's tracing or the fast engine delivers it) stops here when a catch matches, and a raise a catch
        already stopped at (3.12+: ``sys.monitoring`` saw it first) is not shown by pdb a second time."""
        if event == "exception" and CATCHES.items and CATCHES.on_raise(frame, *arg[1:]):
            return self.trace_dispatch
        return None  # not a raise a catch stops at: pdb decides

    def fb_sync(self, frame):
        local = super().fb_sync(frame)  # the line engine may remove every trace function (3.11)
        CATCHES.rearm()
        tracer = CATCHES.frame_tracer()
        return tracer if local is None and tracer is not None and sys.gettrace() is not None else local
