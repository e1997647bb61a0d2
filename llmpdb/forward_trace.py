"""Stop at the entry of one module's ``forward``: a one-shot trace function, and a post-import hook.

Usage::

    OneShotTrace(module, code, on_arrive, caller=hook_caller(sys._getframe(1))).install()
    sys.meta_path.insert(0, AfterImport("torch.nn.modules.module", callback))

``OneShotTrace`` is installed by a forward pre-hook: it waits for the ``call`` event of ``code`` with
``self`` being ``module`` (decorator wrappers in between are passed by), removes itself, then calls
``on_arrive(frame)`` with the forward's frame, its arguments bound as locals. If the module call returns
first (a later pre-hook raised, the forward was replaced), it removes itself when ``caller`` (torch's
``_call_impl``) returns. A trace function already installed (pdb with line breakpoints) keeps receiving
every event meanwhile and is restored afterwards.

``AfterImport`` runs a callback right after a module is imported (torch not imported yet when a class
pattern is armed at a script's first line).
"""

from __future__ import annotations

import os
import sys

__all__ = ["OneShotTrace", "AfterImport", "hook_caller"]


def _frame_self(frame):
    code = frame.f_code
    if not code.co_argcount:
        return None
    try:
        return frame.f_locals.get(code.co_varnames[0])
    except Exception:  # an odd frame: not ours
        return None


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
        return frame.f_code is self.code and _frame_self(frame) is self.module

    def on_call(self, frame, event, arg):
        if event == "call" and self._is_target(frame):
            self.finish()
            try:
                self.on_arrive(frame)
            except Exception as exc:
                if self.on_error is None:
                    raise
                self.on_error(exc)
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


class _LoaderProxy:
    """Runs ``callback(module)`` right after the real loader executed the module."""

    def __init__(self, loader, callback):
        self._loader, self._callback = loader, callback

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        module.__loader__ = self._loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._loader
        self._callback(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


class AfterImport:
    """A one-shot ``sys.meta_path`` finder: call ``callback`` once the module ``name`` has been imported."""

    def __init__(self, name: str, callback):
        self.name, self.callback = name, callback

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _LoaderProxy(spec.loader, self.callback)
                return spec
        return None
