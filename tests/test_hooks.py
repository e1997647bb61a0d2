"""Entry points: PYTHONBREAKPOINT, LLMPDB_DISABLE, set_trace reuse, post_mortem, torch.compile notes."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap

import pytest

import llmpdb
from llmpdb import hooks
from transcript import make_debugger

SCRIPT = textwrap.dedent(
    """
    def step(x):
        doubled = x * 2
        breakpoint()
        return doubled
    print("values", step(1), step(5))
    """
)


def run_python(script_path, stdin_text, env, timeout=60):
    full_env = {**os.environ, "NO_COLOR": "1", **env}
    return subprocess.run([sys.executable, str(script_path)], input=stdin_text, capture_output=True, text=True,
                          env=full_env, timeout=timeout)


@pytest.mark.parametrize("base", ["default", "stdlib"])
def test_pythonbreakpoint_env_opens_llmpdb_and_keeps_breakpoints(tmp_path, base):
    path = tmp_path / "s.py"
    path.write_text(SCRIPT)
    env = {"PYTHONBREAKPOINT": "llmpdb.set_trace"}
    if base == "stdlib":
        env["LLMPDB_BASE"] = "stdlib"
    result = run_python(path, "p doubled\nc\np doubled\nc\n", env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("(llmpdb) ") >= 2
    assert "(llmpdb) 2\n" in result.stdout and "(llmpdb) 10\n" in result.stdout
    assert "values 2 10" in result.stdout


@pytest.mark.parametrize("env", [{"PYTHONBREAKPOINT": "0"}, {"LLMPDB_DISABLE": "1"}])
def test_disabled_breakpoints_are_no_ops_under_the_cli(tmp_path, env):
    path = tmp_path / "s.py"
    path.write_text(SCRIPT)
    full_env = {**os.environ, "NO_COLOR": "1", **env}
    result = subprocess.run([sys.executable, "-m", "llmpdb", "-c", "c", str(path)], input="p 'typed'\n",
                            capture_output=True, text=True, env=full_env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "values 2 10" in result.stdout
    assert "typed" not in result.stdout  # no stop consumed the typed line


def test_set_trace_is_a_no_op_when_disabled(monkeypatch):
    monkeypatch.setenv("LLMPDB_DISABLE", "1")
    assert llmpdb.set_trace() is None
    assert sys.gettrace() is None


def test_breakpointhook_defers_to_another_pythonbreakpoint(monkeypatch):
    calls = []
    monkeypatch.setenv("PYTHONBREAKPOINT", "builtins.print")
    monkeypatch.setattr(sys, "__breakpointhook__", lambda *a, **k: calls.append((a, k)))
    hooks.breakpointhook("x", sep="-")
    assert calls == [(("x",), {"sep": "-"})]


def test_install_and_uninstall():
    previous = sys.breakpointhook
    llmpdb.install()
    try:
        assert sys.breakpointhook is hooks.breakpointhook
    finally:
        llmpdb.uninstall()
    assert sys.breakpointhook is sys.__breakpointhook__ or sys.breakpointhook is previous


def test_post_mortem_stops_in_the_raising_frame():
    debugger, out = make_debugger(["p secret", "c"])
    previous = hooks._DEBUGGER
    hooks.set_debugger(debugger)

    def explode():
        secret = "found-it"
        raise RuntimeError(secret)

    try:
        try:
            explode()
        except RuntimeError:
            llmpdb.post_mortem()
    finally:
        hooks.set_debugger(previous)
    assert "'found-it'" in out.getvalue()
    assert "explode()" in out.getvalue()


def test_post_mortem_never_runs_the_exceptions_traceback_property():
    debugger, out = make_debugger(["p secret", "c"])
    previous = hooks._DEBUGGER
    hooks.set_debugger(debugger)
    touched = []

    class Hostile(RuntimeError):
        @property
        def __traceback__(self):
            touched.append("__traceback__")
            raise KeyError("gotcha")

    def explode():
        secret = "found-it"
        raise Hostile(secret)

    try:
        try:
            explode()
        except Hostile:
            try:
                llmpdb.post_mortem()
            except KeyError:  # was: the property's KeyError escaped into the program
                touched.append("escaped")
    finally:
        hooks.set_debugger(previous)
    assert touched == []
    assert "'found-it'" in out.getvalue()


def test_post_mortem_without_exception_is_a_clear_error(monkeypatch):
    for name in ("last_exc", "last_traceback", "last_value", "last_type"):
        monkeypatch.delattr(sys, name, raising=False)
    with pytest.raises(ValueError, match="needs a traceback"):
        llmpdb.post_mortem()


COMPILED = textwrap.dedent(
    """
    import torch
    @torch.compile(backend="eager")
    def f(x):
        y = x.sin()
        z = y * 2
        breakpoint()
        return z + 1
    print("out", f(torch.ones(3)).shape)
    """
)


def test_breakpoint_in_compiled_code_warns_about_missing_locals(tmp_path):
    path = tmp_path / "c.py"
    path.write_text(COMPILED)
    result = run_python(path, "c\n", {"PYTHONBREAKPOINT": "llmpdb.set_trace"}, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "locals computed inside the compiled graph are missing" in result.stdout
    assert "TORCHDYNAMO_DISABLE=1" in result.stdout
    assert "out torch.Size([3])" in result.stdout


def test_no_compile_shows_every_local(tmp_path):
    path = tmp_path / "c.py"
    path.write_text(COMPILED)
    full_env = {**os.environ, "NO_COLOR": "1"}
    result = subprocess.run([sys.executable, "-m", "llmpdb", "--no-compile", "-c", "c", str(path)],
                            input="p sorted(k for k in locals() if len(k) == 1)\nc\n", capture_output=True,
                            text=True, env=full_env, timeout=120)
    assert "['x', 'y', 'z']" in result.stdout
    assert "compiled graph are missing" not in result.stdout


def test_stop_gate_is_reentrant_and_taken_back_from_a_thread_that_ended():
    import threading

    from llmpdb.debugger.thread_gate import StopGate

    gate = StopGate()
    said = []
    holder = threading.Thread(target=gate.reserve)  # reserves a stop that never comes, then ends
    holder.start()
    holder.join()
    assert gate.owner is holder
    wait = gate.enter(lambda waiting, stopped: said.append((waiting, stopped)))
    assert gate.owner is threading.current_thread()
    assert wait is None and said == []  # an ended thread is not waited for
    assert gate.enter() is None  # a recursive stop in the same thread enters again
    gate.leave()
    assert gate.owner is threading.current_thread()
    gate.leave()
    assert gate.owner is None
