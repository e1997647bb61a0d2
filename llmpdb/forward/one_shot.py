"""Stop at the entry of one module's ``forward``: a one-shot trace function.

Usage::

    OneShotTrace(module, code, on_arrive, caller=hook_caller(sys._getframe(1))).install()

``OneShotTrace`` is installed by a forward pre-hook: it waits for the ``call`` event of ``code`` with
``self`` being ``module`` (decorator wrappers in between are passed by), removes itself, then calls
``on_arrive(frame)`` with the forward's frame, its arguments bound as locals. If the module call returns
first (a later pre-hook raised, the forward was replaced), it removes itself when ``caller`` (torch's
``_call_impl``) returns. A trace function already installed (pdb with line breakpoints) keeps receiving
every event meanwhile and is restored afterwards.
"""

from __future__ import annotations

import os
import sys

from ..inspect.modules import frame_self

__all__ = ["OneShotTrace", "arrive", "hook_caller"]


MODULE_PY = os.path.join("torch", "nn", "modules", "module.py")


def hook_caller(frame):
    """The frame of torch's ``_call_impl`` that called the hook (past dynamo's ``disable`` wrapper)."""
    current = frame
    for _ in range(8):
        if current is None:
            break
        if current.f_code.co_filename.endswith(MODULE_PY):
            return current
        current = current.f_back
    return frame


def arrive(on_arrive, on_error, frame) -> None:
    """Run ``on_arrive(frame)``; an exception it raises goes to ``on_error`` (raised where there is none)."""
    try:
        on_arrive(frame)
    except Exception as exc:
        if on_error is None:
            raise
        on_error(exc)


class OneShotTrace:
    """A trace function that waits for ``module``'s forward to start, then removes itself.

    ``on_arrive(frame)`` runs at the forward's ``call`` event; an exception it raises is handed to
    ``on_error(exc)`` (it must never become an exception in the user's forward)."""

    def __init__(self, module, code, on_arrive, caller, on_error=None):
        self.module, self.code, self.on_arrive, self.on_error = module, code, on_arrive, on_error
        self.caller = caller
        self.previous = sys.gettrace()
        self.caller_trace = caller.f_trace if caller is not None else None
        self.caller_lines = caller.f_trace_lines if caller is not None else True
        self.done = False

    def install(self) -> None:
        if self.caller is not None:
            self.caller.f_trace_lines = False
            self.caller.f_trace = self.watch_caller
        sys.settrace(self.on_call)

    def finish(self) -> None:
        if self.done:
            return
        self.done = True
        sys.settrace(self.previous)
        if self.caller is not None:
            self.caller.f_trace = self.caller_trace
            self.caller.f_trace_lines = self.caller_lines

    def _is_target(self, frame) -> bool:
        if self.code is None:  # no Python code to wait for: the first call is the forward's way in
            return True
        return frame.f_code is self.code and frame_self(frame) is self.module

    def on_call(self, frame, event, arg):
        if event == "call" and self._is_target(frame):
            self.finish()
            arrive(self.on_arrive, self.on_error, frame)
            return frame.f_trace
        if self.previous is not None:
            return self.previous(frame, event, arg)
        return None

    def watch_caller(self, frame, event, arg):
        if self.caller_trace is not None:
            self.caller_trace(frame, event, arg)
        if event == "return":  # the module call ended (an exception, a replaced forward) without a stop
            self.finish()
            return None
        return self.watch_caller
