"""Shared set-up of the fast-breakpoint tests: debuggee sources written to temp files, a counting
``FastPdb``, and ``both()``, which runs one session under pdb and under the mixin and insists the two
transcripts are equal.

Usage: ``from breakpoint_sessions import both, stops, mods, fresh_breakpoints  # noqa: F401``.
"""

from __future__ import annotations

import bdb
import importlib.util
import io
import re
import types

import pytest

from llmpdb.base import stdlib_pdb
from llmpdb.breakpoints import FastBreakpointsMixin

__all__ = ["StockPdb", "FastPdb", "TARGET", "OTHER", "CLOSURES", "fresh_breakpoints", "mods", "load",
           "run_session", "both", "stops", "clear_breakpoints"]

StockPdb = stdlib_pdb.Pdb


class FastPdb(FastBreakpointsMixin, StockPdb):
    """The mixin on the standard base, counting what its engine delivered."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.delivered: list[tuple[str, str, int]] = []
        self.modes_seen: set[str] = set()

    def fb_deliver(self, frame, event, arg):
        self.delivered.append((event, frame.f_code.co_name, frame.f_lineno))
        return super().fb_deliver(frame, event, arg)

    def fb_sync(self, frame):
        local = super().fb_sync(frame)
        self.modes_seen.add(self.fast_breakpoints_mode())
        return local


TARGET = '''\
import functools
import sys

TRACES = []


def helper(n):
    total = 0
    for i in range(n):
        total += i  # L:loop
    return total  # L:helper-return


def work(n):
    a = helper(n)  # L:work-a
    b = helper(n + 1)  # L:work-b
    c = a + b  # L:work-c
    TRACES.append(sys.gettrace())
    return c  # L:work-return


def traced_helper(n):
    TRACES.append(sys.gettrace())  # L:traced
    return n * 2


def calls_traced(n):
    out = [traced_helper(i) for i in range(n)]
    return sum(out)  # L:calls-traced-end


def fib(n):
    if n < 2:
        return n  # L:fib-base
    return fib(n - 1) + fib(n - 2)  # L:fib-rec


def decorate(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)  # L:wrapper
    return wrapper


@decorate
def decorated(x):
    y = x + 1  # L:decorated
    return y


def gen(n):
    for i in range(n):
        yield i * 10  # L:gen-yield


def consume(n):
    total = 0
    for value in gen(n):  # L:consume-for
        total += value
    return total  # L:consume-return


def raises_inside():
    x = 1
    try:
        helper(None)  # L:raise-call
    except TypeError:
        x = 2  # L:except
    return x


def long_running(n):
    total = 0
    for i in range(n):
        total += i  # L:running-loop
    late = total + 1  # L:running-late
    return late


def comprehension(n):
    values = [i * i for i in range(n)]  # L:comprehension
    return values


def jumpy():
    x = 1  # L:jump-x1
    x = 2  # L:jump-x2
    x = 3  # L:jump-x3
    return x
'''

OTHER = '''\
def other(v):
    w = v * 3  # L:other
    return w
'''


@pytest.fixture(autouse=True)
def fresh_breakpoints():
    """pdb keeps breakpoints on the Breakpoint class: each test starts with none."""
    saved = (bdb.Breakpoint.next, bdb.Breakpoint.bplist, bdb.Breakpoint.bpbynumber)
    clear_breakpoints()
    yield
    bdb.Breakpoint.next, bdb.Breakpoint.bplist, bdb.Breakpoint.bpbynumber = saved


def clear_breakpoints() -> None:
    bdb.Breakpoint.next = 1
    bdb.Breakpoint.bplist = {}
    bdb.Breakpoint.bpbynumber = [None]


def load(tmp_path, name: str, source: str) -> types.ModuleType:
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.LINES = {m.group(1): i for i, line in enumerate(source.splitlines(), 1)
                    for m in [re.search(r"# L:(\S+)", line)] if m}
    return module


@pytest.fixture
def mods(tmp_path, request):
    stem = re.sub(r"\W", "_", request.node.name)
    target = load(tmp_path, f"bp_target_{stem}", TARGET)
    other = load(tmp_path, f"bp_other_{stem}", OTHER)
    return target, other


def run_session(cls, func, commands: list[str], *args, start=None):
    """Run ``func(*args)`` under ``cls`` fed with ``commands``; return (debugger, normalised transcript, result)."""
    clear_breakpoints()
    traces = func.__globals__.get("TRACES")
    if traces is not None:
        traces.clear()
    stdout = io.StringIO()
    debugger = cls(stdin=io.StringIO("\n".join(commands) + "\n"), stdout=stdout, nosigint=True, readrc=False)
    result = (start or debugger.runcall)(func, *args)
    text = re.sub(r"0x[0-9a-f]+", "0x?", stdout.getvalue()).replace("(Pdb) ", "(Pdb)\n")
    return debugger, text, result


def both(func, commands: list[str], *args, start=None):
    """The stock and the fast transcript of one session; they must be equal."""
    _, stock, stock_result = run_session(StockPdb, func, commands, *args, start=start)
    stock_traces = list(func.__globals__.get("TRACES", []))
    fast, text, result = run_session(FastPdb, func, commands, *args, start=start)
    assert text == stock, f"fast transcript differs from pdb's:\n--- pdb\n{stock}\n--- fast\n{text}"
    assert result == stock_result
    assert len(func.__globals__.get("TRACES", [])) == len(stock_traces)
    return fast, text


def stops(text: str) -> list[str]:
    """``name:line`` of every stop in a transcript, in order."""
    return [f"{m.group(2)}:{m.group(1)}" for m in re.finditer(r"> \S+?\((\d+)\)([\w<>]+)\(\)(?:->.*)?$", text, re.M)]


CLOSURES = '''\
def make_and_call(n):
    total = 0
    for step in range(n):
        def closure(k):
            return k + step  # L:closure
        total += closure(10)  # L:closure-call
    return total  # L:closure-end


def suspended(n):
    g = gen_values(n)
    first = next(g)
    pause(first)
    rest = list(g)
    return first, rest


def pause(value):
    return value  # L:pause


def gen_values(n):
    for i in range(n):
        yield i * 2  # L:gen-values
'''
