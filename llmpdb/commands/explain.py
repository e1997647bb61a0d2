"""The ``explain`` command: the failing tensor expression's operands, their producers and the mismatch.

Usage (at the prompt)::

    explain                 post-mortem, at a catch stop, or inside an except block: the exception's line
    explain q @ k.mT        at any stop: the operands of an expression, where each came from

The exception in sight is the one this stop is for: the traceback of a post-mortem or ``catch`` stop
(recorded when the stop began), else the exception being handled (``sys.exc_info``, a ``breakpoint()``
inside an ``except``). Nothing of the program runs (see ``inspect.explain``).
"""

from __future__ import annotations

import sys
import types

from ._command import CommandError, command

__all__ = ["ExplainCommands"]


def _innermost(tb):
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb


class ExplainCommands:
    """Command mixin: ``explain``; remembers the traceback each stop was opened with."""

    _explain_stops: list = []

    def stop_explain(self, stop, proceed):
        """Stop stage ``explain``: remember the traceback (or exception) this stop was opened with."""
        tb_or_exc = stop.tb_or_exc
        if isinstance(tb_or_exc, BaseException):  # 3.13+ post-mortem hands the exception itself
            record = (tb_or_exc.__traceback__, tb_or_exc)
        else:
            record = (tb_or_exc if isinstance(tb_or_exc, types.TracebackType) else None, None)
        self._explain_stops = [*self._explain_stops, record]
        try:
            return proceed()
        finally:
            self._explain_stops = self._explain_stops[:-1]

    def _exception_in_sight(self):
        """(traceback, exception or None) of this stop, or None when no exception is in sight."""
        tb, exc = self._explain_stops[-1] if self._explain_stops else (None, None)
        handled = sys.exc_info()[1]
        handled_tb = handled.__traceback__ if handled is not None else None
        if tb is not None:
            if exc is None and handled_tb is not None and _innermost(handled_tb).tb_frame is _innermost(tb).tb_frame:
                exc = handled
            if exc is None:
                exc = self.caught_exception()
            return tb, exc
        if handled_tb is not None:
            return handled_tb, handled
        return None

    @command
    def do_explain(self, arg):
        """explain [EXPR]
        Explain a shape error: the failing expression of the exception in sight (post-mortem, a catch
        stop, or a stop inside an except block), each operand with its shape, dimension names and the
        module whose output it is (path from the root model, class, then the tensor methods applied:
        → view → transpose), and the mismatch (matmul, broadcasting ops, cat, view/reshape, Linear,
        Conv1D, an Embedding's IndexError, scaled_dot_product_attention, einsum, a failed subscript).
        Heads against kv heads says GQA was not expanded. A chained cause (raise ... from e) is
        explained when the top exception has nothing to explain. With EXPR (any stop): the same for an
        expression, read without running it (names, attributes as stored, constant subscripts, tensor
        methods such as .transpose/.view). Nothing of the program runs.
        Example: explain query_states @ key_states.transpose(2, 3)"""
        from ..inspect.explain import explain_expression, explain_traceback  # lazy: start-up speed
        from ..render.explain import render_explanation

        text = (arg or "").strip()
        frame = self.current_frame()
        if text:
            if frame is None:
                raise CommandError("no frame to read the expression in")
            try:
                report = explain_expression(frame, text)
            except ValueError as exc:
                raise CommandError(str(exc)) from None
        else:
            found = self._exception_in_sight()
            if found is None:
                raise CommandError("no exception in sight (explain works post-mortem, at a catch stop or inside "
                                   "an except block); explain EXPR explains an expression here")
            report = explain_traceback(*found)
        self.message(render_explanation(report, width=self.out_width(), style=self.out_style()))
