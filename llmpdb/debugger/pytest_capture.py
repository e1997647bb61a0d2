"""A stop inside a pytest run: pytest's output capture is off while the prompt is up.

Usage: mixed into the composed ``Pdb`` (``debugger/core.py``); the stop pipeline runs
``stop_host_capture`` at every stop. Nothing to call by hand::

    PYTHONBREAKPOINT=llmpdb.set_trace pytest test_x.py   # breakpoint() in a test opens llmpdb

pytest captures a test's output and replaces ``sys.stdin`` with a stand-in that raises ``OSError:
pytest: reading from stdin while output is captured!``. Its own ``pdb.set_trace`` (``--pdb``,
``--trace``, ``--pdbcls``) suspends capture first; a stop that enters llmpdb directly (``breakpoint()``
under ``PYTHONBREAKPOINT=llmpdb.set_trace``, ``llmpdb.set_trace()``) does the same here: capture is
suspended (input too) for the stop, pytest's ``pytest_enter_pdb``/``pytest_leave_pdb`` hooks run (a
``pytest-timeout`` timer stops), and capture resumes when the program runs on. When pytest already
suspended it (its own wrapper) or runs with ``-s``, this stage does nothing.
"""

from __future__ import annotations

import sys

__all__ = ["PytestCaptureMixin", "active_pytest_capture"]


def active_pytest_capture():
    """Usage: ``(capman, config) = active_pytest_capture() or (None, None)``; pytest's capture manager
    and config while a pytest run captures this process's input right now, else None."""
    capture = sys.modules.get("_pytest.capture")
    debugging = sys.modules.get("_pytest.debugging")
    if capture is None or debugging is None:
        return None
    stand_in = getattr(capture, "DontReadFromInput", None)
    if stand_in is None or not isinstance(sys.stdin, stand_in):
        return None  # not captured now: -s, or pytest's own debugger wrapper suspended it
    wrapper = getattr(debugging, "pytestPDB", None)
    manager = getattr(wrapper, "_pluginmanager", None)
    config = getattr(wrapper, "_config", None)
    if manager is None or config is None:
        return None
    try:
        capman = manager.getplugin("capturemanager")
    except Exception:  # a pytest whose plugin manager changed: leave capture as it is
        return None
    return (capman, config) if capman is not None else None


class PytestCaptureMixin:
    """Stop stage ``host capture``: pytest's capture suspended for the stop, resumed after it."""

    def stop_host_capture(self, stop, proceed):
        found = active_pytest_capture()
        # a debugger given its own streams (``Pdb(stdin=...)``, a remote seat) does not read the terminal
        if found is None or self.stdin not in (None, sys.stdin, sys.__stdin__):
            return proceed()
        capman, config = found
        captured = (sys.stdin, sys.stdout)
        capman.suspend(in_=True)
        # a debugger made while capture was on holds the capturing streams: point it at the real ones
        if self.stdin is captured[0]:
            self.stdin = sys.stdin
        if self.stdout is captured[1]:
            self.stdout = sys.stdout
        self.message("llmpdb: pytest's output capture is off for this stop")
        hook = config.pluginmanager.hook
        _call_hook(hook.pytest_enter_pdb, config=config, pdb=self)
        try:
            return proceed()
        finally:
            _call_hook(hook.pytest_leave_pdb, config=config, pdb=self)
            capman.resume()


def _call_hook(hook, **kwargs) -> None:
    try:
        hook(**kwargs)
    except Exception as exc:  # another plugin's hook must not end the stop or the test
        print(f"llmpdb: a pytest plugin failed at the stop: {type(exc).__name__}: {exc}", file=sys.stderr)
