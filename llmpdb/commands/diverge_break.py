"""``diverge ... --break``: run the second variant once more and stop at the entry of the diverging module.

Usage (mixed into the debugger with ``DivergeCommands``)::

    self._diverge_break(module, label, run_once)   # run_once(): evaluates EXPR's second variant

The stop is a recursive debugger, as ``debug CODE`` opens (``((llmpdb))``): a forward pre-hook on the
module installs a one-shot trace function (``forward/one_shot.py``) that waits for its ``forward`` to
start; there the recursive debugger takes over with its own tracing, bounded by this command's frame, so
``n``, ``s`` and breakpoints work inside the run and ``c`` finishes it. The outer stop's trace function and
frames are left as they were; the pre-hook is removed at the first call, and in any case when the run ends.
"""

from __future__ import annotations

import sys

__all__ = ["DivergeBreak"]


class DivergeBreak:
    """Command-mixin helper: the ``--break`` re-run of ``diverge``."""

    def _diverge_break(self, module, header: str, run_once) -> str | None:
        """Stop at ``module``'s forward during ``run_once()``; returns an error line, or None."""
        from ..forward.arming import dynamo_disable
        from ..forward.one_shot import OneShotTrace, hook_caller
        from ..inspect.modules import code_of

        child = self._recursive_debugger()
        arrived = []
        bottom = []

        def arrive(frame) -> None:
            arrived.append(frame)
            child.reset()
            child.botframe = bottom[0] if bottom else None
            frame.f_trace = child.trace_dispatch
            sys.settrace(child.trace_dispatch)
            child.message(header)
            child.interaction(frame, None)

        def pre(mod, args):
            handle.remove()
            forward = vars(mod).get("forward") or type(mod).forward
            OneShotTrace(mod, code_of(forward), arrive, hook_caller(sys._getframe(1))).install()
            return None

        outer_trace = sys.gettrace()
        sys.settrace(None)
        handle = module.register_forward_pre_hook(dynamo_disable(pre))
        self.message("ENTERING RECURSIVE DEBUGGER")
        self._llmpdb_child = child
        failure = None
        try:  # a command runs inside the outer debugger's trace function: tracing is off there until
            sys.call_tracing(lambda: (bottom.append(sys._getframe()), run_once()), ())  # (as `debug` does)
        except BaseException as exc:  # what the run raises, SystemExit/KeyboardInterrupt too: one line
            failure = f"the --break run raised {type(exc).__name__}: {exc}"
        finally:
            handle.remove()
            self._llmpdb_child = None
            sys.settrace(outer_trace)
        self.message("LEAVING RECURSIVE DEBUGGER")
        if not arrived and failure is None:
            failure = "the --break run never called that module's forward"
        return failure
