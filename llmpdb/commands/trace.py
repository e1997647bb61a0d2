"""The ``trace`` command: the shape-change table of one forward pass.

Usage (at the prompt)::

    trace model(**inputs)            run the call now under forward hooks, print the table
    trace                            arm hooks for the next forward of the root model (printed when it ends)
    trace layers.*.self_attn --depth 4 --all    only matching modules, 4 levels deep, every layer listed
    trace off                        drop an armed trace

An argument holding a call (``model(x)``, ``self.mlp(h)``) is an expression run now; anything else is a
PATTERN as ``break-module`` takes it (a qualified name, a glob or a class name). Hooks are removed when the
call ends, also when it raises (the rows recorded so far are printed with the error).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import ast

from ..session import SESSION, register_stop_note
from ._command import CommandError, command, parse_args, whole_number

if TYPE_CHECKING:  # annotations only: the module is imported at first use
    from ..forward.trace import ForwardTrace

__all__ = ["TraceCommands", "is_call_expression"]

_ARMED_KEY = "trace-armed"


_depth = whole_number(0, 1000)


def is_call_expression(text: str) -> bool:
    """Usage: ``is_call_expression("model(**inputs)")`` -> True; ``"layers.*.mlp"`` -> False."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return False
    return any(isinstance(node, ast.Call) for node in ast.walk(tree))


def _names_of(root) -> dict[int, str]:
    from ..inspect.modules import model_names
    names = model_names(root)
    return {key: (value[0] if value else "") for key, value in names.names.items()}


def _root_running(frame, roots) -> bool:
    from ..inspect.frame_kinds import is_plumbing
    from ..inspect.modules import is_forward_frame
    while frame is not None:
        if not is_plumbing(frame) and any(is_forward_frame(frame, r) for r in roots):
            return True
        frame = frame.f_back
    return False


@register_stop_note
def unfinished_trace_note(frame, debugger) -> str | None:
    """A next-forward trace whose root forward is no longer running (a BaseException ended it): print it."""
    trace = SESSION.memory(_ARMED_KEY, dict).get("trace")
    if trace is None or trace.finished or not trace.calls:
        return None
    roots = SESSION.memory(_ARMED_KEY, dict).get("roots", [])
    if _root_running(frame, roots):
        return None
    trace.finish(note="interrupted")
    return None


class TraceCommands:
    """Command mixin: ``trace``."""

    def _trace_roots(self) -> tuple[list[tuple[object, str]], list[str]]:
        pairs, _ = self._nav_root_pairs()
        roots = [m for _, m in pairs]
        aliases = list(self._nav_aliases(roots)) if roots else []
        if len(pairs) > 1:
            return [(m, n or type(m).__name__) for n, m in pairs], aliases
        return [(m, "") for _, m in pairs], aliases

    def _trace_print(self, trace: ForwardTrace, fold: bool, title: str | None = None) -> None:
        from ..inspect.trace_records import collapse_calls
        from ..render.trace import render_trace
        rows = collapse_calls(trace.calls, fold=fold)
        if title:
            self.message(title)
        self.message(render_trace(rows, width=self.out_width(), calls=len(trace.calls), dropped=trace.dropped,
                                  folded=fold, style=self.out_style()))

    @command
    def do_trace(self, arg):
        """trace [PATTERN | EXPR] [--depth N] [--all] | trace off
        The shape-change table of one forward pass: for each module call, in the order the calls start,
        its path, class, input shapes, output shapes and dtype (`i64 → f32` where it changes). Identical
        consecutive layers fold into one row (`model.layers.{0..31} ×32`) unless --all.
          trace EXPR   run EXPR now (it must hold a call: trace model(**inputs)) under forward hooks
          trace        arm hooks for the next forward of the root model; the table prints when it ends
          PATTERN      only modules matching it (a name, glob or class, as break-module takes)
          --depth N    only modules at most N levels below the root (0: the root alone)
          trace off    drop an armed trace
        Hooks are removed when the pass ends, also when it raises. Hooks see module calls only: a
        view/transpose/cat inside a forward is not a row. Shapes are read from metadata, never values.
        Example: trace model(**inputs) --depth 2"""
        from ..forward.trace import ForwardTrace, traced_modules
        from ..inspect.module_match import match_modules, near_names
        args = parse_args(arg, self.do_trace, flags={"--all"}, options={"--depth": _depth})
        text, depth, fold = args.rest, args.value("--depth"), not args.flag("--all")
        state = SESSION.memory(_ARMED_KEY, dict)
        if text == "off":
            trace = state.pop("trace", None)
            if trace is None or trace.finished:
                self.message("trace: nothing armed")
                return
            trace.remove()
            trace.finished = True
            self.message("trace: disarmed (hooks removed)")
            return
        pairs, aliases = self._trace_roots()
        if not pairs:
            raise CommandError("no model in sight (no module on the stack or in the frame); "
                               "set one with `root-model EXPR`")
        is_expr = bool(text) and is_call_expression(text)
        only = None
        if text and not is_expr:
            if text.startswith("-"):
                raise CommandError(f"unknown option {text.split()[0]!r}")
            roots = [m for m, _ in pairs]
            matches = match_modules(text, roots, aliases)
            if not matches:
                near = near_names(text, roots)
                raise CommandError(f"no module matches {text!r}" + (f"; near: {', '.join(near)}" if near else "")
                                   + " (an expression to run must hold a call: trace model(**inputs))")
            only = {id(m.module) for m in matches}
        modules = traced_modules(pairs, _names_of, depth=depth, only=only)
        trace = ForwardTrace(modules, [m for m, _ in pairs])
        if is_expr:
            self._trace_now(trace, text, fold)
            return
        old = state.get("trace")
        if old is not None and not old.finished:
            old.remove()
            old.finished = True
        state["trace"], state["roots"] = trace, [m for m, _ in pairs]
        shown = sum(1 for _, _, s in modules if s)
        trace.arm_next(lambda t: self._trace_done(t, fold))
        names = ", ".join(n or type(m).__name__ for m, n in pairs)
        from ..render.table import wrap_lines
        self.message(wrap_lines(f"trace: armed on {shown} modules of {names}; the table prints when its next "
                                "forward ends (`trace off` to drop)", self.out_width()))

    def _trace_done(self, trace: ForwardTrace, fold: bool) -> None:
        """Runs inside the program (the root's forward hook): print, never raise into the forward."""
        try:
            self._trace_print(trace, fold, title="trace: the forward pass just ran")
        except Exception as exc:
            self.error(f"trace: cannot print the table: {type(exc).__name__}: {exc}")

    def _trace_now(self, trace: ForwardTrace, text: str, fold: bool) -> None:
        frame = self.current_frame()
        if frame is None:
            raise CommandError("no frame to evaluate in")
        try:
            code = compile(text, "<llmpdb trace>", "eval")
        except SyntaxError as exc:
            raise CommandError(f"invalid expression {text!r}: {exc.msg}") from None
        failure = None
        with trace.recording():
            try:
                eval(code, frame.f_globals, self.frame_locals())
            except BaseException as exc:  # SystemExit/KeyboardInterrupt from the user's code end only this
                failure = exc
        self._trace_print(trace, fold)
        if failure is not None:
            self.error(f"trace: {text} raised {type(failure).__name__}: {failure} "
                       f"(rows above were recorded before it; hooks removed)")
