"""The ``watch`` / ``unwatch`` commands: a tensor's metadata recorded at every stop, and its history.

Usage (at the prompt)::

    watch attention_mask     record it now and at every later stop; a stop says when it changed
    watch                    each watched expression's history, the changes marked
    unwatch attention_mask   forget one (or by number: unwatch 1); unwatch / unwatch all: every one

Evaluating a watch never stops a stop: whatever the expression raises (``NameError`` where it is not in
scope, ``SystemExit``, ``KeyboardInterrupt``) becomes the value of that stop, one line. It runs on a copy
of the frame's locals, so an assignment inside it (``(x := 1)``) changes nothing in the program; only
metadata of the result is kept, never the value. Calls are refused when the watch is set, except
``len()`` and pure tensor methods (``llmpdb.inspect.watch_expr``): ``watch lst.pop()`` would pop at
every stop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..session import SESSION, register_stop_note
from ._command import CommandError, command

if TYPE_CHECKING:  # annotations only: the module is imported at first use
    from ..inspect.watch_records import Watch

__all__ = ["WatchCommands", "watches", "evaluate_watch"]

_KEY = "watches"


def watches() -> list[Watch]:
    """Usage: ``watches()``; the session's watched expressions, in the order they were set."""
    return SESSION.memory(_KEY, list)


def _where(frame) -> str:
    code = frame.f_code
    return f"{getattr(code, 'co_qualname', code.co_name)}:{frame.f_lineno}"


def evaluate_watch(watch: Watch, frame, local_map: dict | None = None):
    """Usage: ``evaluate_watch(w, frame)`` -> a Sample; never raises (BaseException included)."""
    from ..inspect.frames import frame_locals
    from ..inspect.watch_expr import GUARD, pure_call
    from ..inspect.watch_records import failed, observe
    try:
        namespace = dict(local_map if local_map is not None else frame_locals(frame))
        namespace[GUARD] = pure_call
        return observe(eval(watch.code, frame.f_globals, namespace))
    except BaseException as exc:  # the user's expression: a NameError out of scope, SystemExit, ^C...
        return failed(exc)


def _locals_for(frame, debugger) -> dict | None:
    current = getattr(debugger, "current_frame", None)
    if callable(current) and current() is frame:
        return debugger.frame_locals()
    return None


@register_stop_note
def watch_note(frame, debugger) -> list[str]:
    """At every stop: record each watch; one line for each that changed since the stop before."""
    lines = []
    style_of = getattr(debugger, "out_style", None)
    style = style_of() if callable(style_of) else None
    local_map = _locals_for(frame, debugger) if watches() else None
    for watch in watches():
        previous = watch.record(evaluate_watch(watch, frame, local_map), SESSION.stop, _where(frame))
        if previous is not None:
            from ..render.watch import render_change
            lines.append(render_change(watch, previous, style))
    return lines


class WatchCommands:
    """Command mixin: ``watch``, ``unwatch``."""

    @command
    def do_watch(self, arg):
        """watch [EXPR]
        Record EXPR's tensor summary (shape, dtype, device, layout; tuples, lists and dicts of tensors
        too) now and at every later stop; a stop where it changed prints one line saying so. Without
        EXPR: each watched expression's history, stop by stop, with the changes marked. Values are never
        read or kept. What EXPR raises at a stop (out of scope, SystemExit...) is recorded, never raised.
        EXPR runs at every stop, so it may not change the program: calls are refused (lst.pop() would pop
        at each stop) except len() and tensor methods that make a new tensor or a number (size, dim,
        numel, view, reshape, transpose, permute, t, flatten, squeeze, unsqueeze, contiguous, chunk,
        split, unbind, narrow, select, float, half, bfloat16, double, int, long, bool, detach, abs, sum,
        mean, amax, amin, isnan, isinf, isfinite, any, all, count_nonzero...), run only on real tensors.
        unwatch EXPR | N | all removes watches.
        Example: watch hidden_states"""
        from ..inspect.watch_records import Watch
        from ..inspect.watch_expr import WatchRefused, compile_watch
        from ..render.watch import render_watches
        text = (arg or "").strip()
        if not text:
            self.message(render_watches(watches(), width=self.out_width(), style=self.out_style()))
            return
        try:
            code = compile_watch(text)
        except SyntaxError as exc:
            raise CommandError(f"invalid expression {text!r}: {exc.msg}") from None
        except WatchRefused as exc:
            raise CommandError(f"refused {text!r}: {exc}") from None
        if any(w.expr == text for w in watches()):
            raise CommandError(f"{text} is already watched (watch alone shows its history)")
        frame = self.current_frame()
        if frame is None:
            raise CommandError("no frame to evaluate in")
        number = max((w.number for w in watches()), default=0) + 1
        watch = Watch(number, text, code=code)
        sample = evaluate_watch(watch, frame, self.frame_locals())
        watch.record(sample, SESSION.stop, _where(frame))
        watches().append(watch)
        self.message(f"watch {number}: {text} = {sample.text} (recorded at every stop; `watch` shows the history)")

    @command
    def do_unwatch(self, arg):
        """unwatch [EXPR | N | all]
        Stop watching EXPR (as typed to watch) or watch number N; without an argument or with all, every
        watch.
        Example: unwatch 1"""
        text = (arg or "").strip()
        current = watches()
        if not text or text == "all":
            count = len(current)
            current.clear()
            self.message(f"unwatch: removed {count} watch{'es' if count != 1 else ''}")
            return
        keep = [w for w in current if w.expr != text and str(w.number) != text]
        if len(keep) == len(current):
            known = ", ".join(f"{w.number}: {w.expr}" for w in current) or "none"
            raise CommandError(f"no watch {text!r} (watched: {known})")
        removed = [w for w in current if w not in keep]
        current[:] = keep
        self.message(f"unwatch: removed watch {removed[0].number} ({removed[0].expr})")
