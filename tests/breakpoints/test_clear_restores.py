"""``clear`` at the prompt gives the code back at once (issue #21): after ``cl 1`` of a breakpoint hit in
``helper``, ``helper.__code__`` is its original code object again (3.11 hook engine: marshal-able, not an
instrumented copy) and no local ``sys.monitoring`` event of llmpdb stays on it (3.12+), while still at the
prompt, before any ``next``/``continue``. Each session equals pdb's transcript (while the breakpoint is
set, 3.11's ``__code__`` is the instrumented copy: that is how the engine works, so it is not printed).
Torch-free: runs on 3.12+."""

from __future__ import annotations

import pytest

from breakpoint_sessions import both, load, stops
from breakpoint_sessions import fresh_breakpoints, mods  # noqa: F401  (fixtures)

SOURCE = '''\
import marshal
import sys


def helper(n):
    total = 0
    for i in range(n):
        total += i  # L:loop
    return total


def other(n):
    return n + 1  # L:other


ORIGINAL = helper.__code__
OTHER = other.__code__


def local_events(code):
    """llmpdb's local ``sys.monitoring`` events on ``code`` (0 before 3.12)."""
    mon = getattr(sys, "monitoring", None)
    if mon is None:
        return 0
    events = 0
    for tool in range(6):
        if mon.get_tool(tool) == "llmpdb":
            events |= mon.get_local_events(tool, code)
    return events


def state(func, original, events=True):
    """What a program that marshals right after the stop would see (and llmpdb's local events on it)."""
    try:
        marshal.dumps(func.__code__)
        dumps = "ok"
    except ValueError as exc:
        dumps = f"ValueError: {exc}"
    return (func.__code__ is original, func.__code__.co_code == original.co_code, dumps,
            local_events(func.__code__) if events else 0)


def driver(n):
    first = helper(n)  # L:first
    return first + helper(n) + other(n)
'''

RESTORED = "(True, True, 'ok', 0)"


@pytest.mark.parametrize("how", ["cl 1", "clear 1", "cl FILE:LOOP"])
def test_clear_at_the_prompt_restores_the_code_at_once(tmp_path, how):
    target = load(tmp_path, f"bp_clear_now_{how.split()[0]}_{len(how)}", SOURCE)
    loop = target.LINES["loop"]
    clear = how.replace("FILE", target.__file__).replace("LOOP", str(loop))
    commands = [f"b {target.__file__}:{loop}", "c", clear]
    commands += ["p state(helper, ORIGINAL)", "p i", "n", "p state(helper, ORIGINAL, False)", "c"]
    fast, text = both(target.driver, commands, 3)
    assert stops(text)[1] == f"helper:{loop}"
    states = [line for line in text.splitlines() if line.startswith("(True") or line.startswith("(False")]
    # right after the clear; after ``n`` too (where 3.12+ has the stepping events on it, as it must)
    assert states == [RESTORED, RESTORED]


def test_clear_of_one_of_two_keeps_the_other_breakpoint_working(tmp_path):
    target = load(tmp_path, "bp_clear_now_two", SOURCE)
    loop, other = target.LINES["loop"], target.LINES["other"]
    commands = [f"b {target.__file__}:{loop}", f"b {target.__file__}:{other}", "c", "cl 1",
                "p state(helper, ORIGINAL)", "c", "p n", "c"]
    fast, text = both(target.driver, commands, 3)
    assert stops(text)[1:] == [f"helper:{loop}", f"other:{other}"]
    assert RESTORED in text.splitlines()
