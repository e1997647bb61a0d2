"""The 3.11 hook compiler: re-assembling is exact, hooks run exactly where line events fire, and hooked code
behaves and traces like the original. Python 3.11 only (3.12+ uses sys.monitoring instead)."""

from __future__ import annotations

import dis
import importlib
import importlib.util
import sys
import types

import pytest

pytestmark = pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="bytecode hooks are for Python 3.11")

CORPUS = '''\
import contextlib


def loops(n):
    total = 0
    for i in range(n):
        if i % 2: continue
        total += i
    else:
        total += 100
    while n > 0:
        n -= 1
        if n == 1: break
    while n: n -= 1
    return total


def excepts(x):
    out = []
    for v in (x, 0, "a"):
        try:
            out.append(10 / v)
        except ZeroDivisionError:
            out.append("zero")
        except TypeError as exc:
            out.append(type(exc).__name__)
        else:
            out.append("ok")
        finally:
            out.append("fin")
    try:
        try:
            raise KeyError(1)
        finally:
            out.append("inner")
    except KeyError:
        out.append("outer")
    return out


def conditional(a, b):
    y = a if a > b else b
    z = (a
         if b
         else -a)
    w = a and b or 7
    return [y, z, w, a < b < 10]


def comprehensions(n):
    xs = [i * i for i in range(n) if i % 2]
    d = {i: [j for j in range(i)] for i in range(3)}
    g = sum(i for i in range(n))
    f = lambda q: q + 1  # noqa: E731
    return xs, d, g, f(n)


def gen(n):
    for i in range(n):
        got = yield i
        if got:
            yield got


def delegating(n):
    yield from gen(n)
    x = yield
    return x


def use_gens(n):
    out = list(gen(n))
    g = delegating(2)
    out += [next(g), next(g), next(g)]
    try:
        g.send(5)
    except StopIteration as stop:
        out.append(stop.value)
    return out


def withs(n):
    out = []
    with contextlib.suppress(ValueError):
        out.append(1)
        raise ValueError
    with contextlib.nullcontext(n) as v, contextlib.nullcontext():
        out.append(v)
    return out


def nested(n):
    def inner(k):
        return k * n
    cell = 3
    def closure():
        return cell + n
    return inner(2) + closure()


def matching(v):
    match v:
        case [a, b]:
            return a + b
        case {"k": k}:
            return k
        case int() if v > 3:
            return "big"
        case _:
            return None


def long_jumps(n):
    total = 0
    for i in range(n):
        if i > 1000:
            total += 1; total += 2; total += 3; total += 4; total += 5; total += 6; total += 7; total += 8
            total += 1; total += 2; total += 3; total += 4; total += 5; total += 6; total += 7; total += 8
            total += 1; total += 2; total += 3; total += 4; total += 5; total += 6; total += 7; total += 8
            total += 1; total += 2; total += 3; total += 4; total += 5; total += 6; total += 7; total += 8
            total += 1; total += 2; total += 3; total += 4; total += 5; total += 6; total += 7; total += 8
            total += 1; total += 2; total += 3; total += 4; total += 5; total += 6; total += 7; total += 8
            total += 1; total += 2; total += 3; total += 4; total += 5; total += 6; total += 7; total += 8
            total += 1; total += 2; total += 3; total += 4; total += 5; total += 6; total += 7; total += 8
            total += 1; total += 2; total += 3; total += 4; total += 5; total += 6; total += 7; total += 8
            total += 1; total += 2; total += 3; total += 4; total += 5; total += 6; total += 7; total += 8
        total += i
    return total


def finally_flow(n):
    out = []
    for i in range(n):
        try:
            if i == 1:
                continue
            if i == 3:
                break
            out.append(i)
        finally:
            out.append(-i)
    try:
        return out
    finally:
        out.append("end")


async def agen(n):
    for i in range(n):
        yield i


async def co(n):
    total = 0
    async for v in agen(n):
        total += v
    return total


def run_async(n):
    import asyncio
    return asyncio.run(co(n))


def misc(*args, **kw):
    if (k := len(args)) > 1:
        k += 1
    text = f"{k!r:>4}-{kw.get('a', 0)}"
    assert k >= 0, "never"
    values = {**kw, "n": [*args]}
    return text, values, 1 < k <= 5


CASES = [(loops, (5,)), (excepts, (2,)), (conditional, (1, 2)), (conditional, (3, 0)), (comprehensions, (6,)),
         (use_gens, (3,)), (withs, (4,)), (nested, (2,)), (matching, ([1, 2],)), (matching, ({"k": 9},)),
         (matching, (5,)), (matching, ("s",)), (long_jumps, (4,)),
         (finally_flow, (5,)), (run_async, (3,)), (misc, (1, 2, 3))]
'''


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "hook_corpus.py"
    path.write_text(CORPUS)
    spec = importlib.util.spec_from_file_location("hook_corpus", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tree(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _tree(const)


def _hooked(code, lines, hook):
    from llmpdb.breakpoints.bytecode import instrument

    consts = tuple(_hooked(c, lines, hook) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    code = code.replace(co_consts=consts)
    new = instrument(code, lines, hook)
    return new if new is not None else code


def _line_events(func, args, filename):
    events = []

    def trace(frame, event, arg):
        if frame.f_code.co_filename != filename:
            return None
        if event == "line":
            events.append((frame.f_code.co_name, frame.f_lineno))
        return trace

    sys.settrace(trace)
    try:
        result = func(*args)
    finally:
        sys.settrace(None)
    return result, events


@pytest.mark.parametrize("name", ["json.decoder", "ast", "dis", "argparse", "pdb", "email.message"])
def test_rebuild_without_hooks_is_byte_identical(name):
    from llmpdb.breakpoints.bytecode import rebuild

    module = importlib.import_module(name)
    source = open(module.__file__).read()
    count = 0
    for code in _tree(compile(source, module.__file__, "exec")):
        new = rebuild(code)
        assert new is not None, code
        assert new.co_code == code.co_code, code
        assert list(new.co_positions()) == list(code.co_positions()), code
        assert dis._parse_exception_table(new) == dis._parse_exception_table(code), code
        count += 1
    assert count > 10


def test_hooks_fire_exactly_at_line_events_and_change_nothing_else(corpus):
    checked = 0
    for func, args in corpus.CASES:
        original = func.__code__
        expected_result, expected_events = _line_events(func, args, corpus.__file__)
        lines = sorted({line for code in _tree(original) for _, _, line in code.co_lines() if line})
        for line in lines:
            hits = []

            def hook():
                frame = sys._getframe(1)
                hits.append((frame.f_code.co_name, frame.f_lineno))

            func.__code__ = _hooked(original, frozenset({line}), hook)
            try:
                result = func(*args)
                hook_count = len(hits)
                traced_result, events = _line_events(func, args, corpus.__file__)
            finally:
                func.__code__ = original
            assert result == expected_result and traced_result == expected_result, (func.__name__, line)
            assert events == expected_events, (func.__name__, line)  # hooks add no line event
            assert hook_count == sum(1 for _, l in expected_events if l == line), (func.__name__, line)
            checked += 1
    assert checked > 100


def test_may_reach(corpus):
    from llmpdb.breakpoints.bytecode import may_reach

    code = corpus.loops.__code__
    last = max(line for _, _, line in code.co_lines() if line)
    assert may_reach(code, 0, frozenset({last}), False, frozenset())
    end = max(start for start, _, _ in code.co_lines())
    assert not may_reach(code, end, frozenset({code.co_firstlineno + 2}), False, frozenset())
    assert may_reach(code, end, frozenset(), True, frozenset())
