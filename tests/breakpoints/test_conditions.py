"""False breakpoint conditions answered in the engine (``breakpoints/conditions.py``) mean what pdb means.

``ConditionCache.all_false`` is checked against ``bdb.effective`` itself on a real suspended frame, for one
breakpoint on a line (its fast path) and for two, in every state a breakpoint can be in; then whole sessions
that change one conditional breakpoint at the prompt (``condition``, ``disable``, ``enable``, ``ignore``)
run under pdb and under the fast engine and must give the same transcript.
"""

from __future__ import annotations

import bdb
import itertools
import sys

import pytest

from breakpoint_sessions import both, stops
from breakpoint_sessions import fresh_breakpoints, mods  # noqa: F401  (fixtures)
from llmpdb.breakpoints.conditions import ConditionCache

CONDITIONS = (None, "", "i < 0", "i >= 0", "no_such_name > 0", "(", "1 / 0")
MONITORING = sys.version_info >= (3, 12)


def _suspended():
    i = 3  # noqa: F841  (read by the conditions)
    yield


def _frame():
    gen = _suspended()
    next(gen)
    return gen, gen.gi_frame


def _make(frame, specs):
    """Breakpoints at the frame's line: each spec is (enabled, cond, ignore, funcname)."""
    made = []
    for enabled, cond, ignore, funcname in specs:
        bp = bdb.Breakpoint(frame.f_code.co_filename, frame.f_lineno, cond=cond, funcname=funcname)
        bp.enabled, bp.ignore = enabled, ignore
        made.append(bp)
    return made


def _clear():
    bdb.Breakpoint.next = 1
    bdb.Breakpoint.bplist = {}
    bdb.Breakpoint.bpbynumber = [None]


SPECS = [(enabled, cond, ignore, None) for enabled, cond, ignore in itertools.product((True, False), CONDITIONS,
                                                                                        (0, 1))]
SPECS += [(True, "i < 0", 0, "_suspended"), (True, "i < 0", 0, "another_function")]  # `b FUNCTION, COND`


@pytest.mark.parametrize("count", [1, 2])
def test_all_false_agrees_with_bdb_effective(count):
    gen, frame = _frame()
    cache = ConditionCache()
    answered_true = 0
    for specs in itertools.product(SPECS, repeat=count):
        _clear()
        bps = _make(frame, specs)
        answer = cache.all_false(frame.f_code.co_filename, frame.f_lineno, frame)
        hits = [bp.hits for bp in bps]
        if not answer:
            assert hits == [0] * count, specs  # the hits it counted are undone: pdb counts them itself
            continue
        answered_true += 1
        _clear()  # the same breakpoints again, judged by pdb's own function
        again = _make(frame, specs)
        assert bdb.effective(frame.f_code.co_filename, frame.f_lineno, frame) == (None, None), specs
        assert [bp.hits for bp in again] == hits, specs
        assert [bp.ignore for bp in again] == [bp.ignore for bp in bps], specs
    # the false condition, alone or with a disabled one, is answered here (not handed to pdb)
    assert answered_true >= (4 if count == 1 else 16)
    _clear()
    gen.close()


def test_all_false_answers_a_false_condition_and_counts_its_hit():
    gen, frame = _frame()
    cache = ConditionCache()
    bp, = _make(frame, [(True, "i < 0", 0, None)])
    for _ in range(3):
        assert cache.all_false(frame.f_code.co_filename, frame.f_lineno, frame)
    assert bp.hits == 3
    bp.cond = "i == 3"  # `condition 1 i == 3` at the prompt: the new text is compiled, and it is true
    assert not cache.all_false(frame.f_code.co_filename, frame.f_lineno, frame)
    assert bp.hits == 3
    bp.cond = None  # `condition 1`: unconditional, pdb stops
    assert not cache.all_false(frame.f_code.co_filename, frame.f_lineno, frame)
    bp.cond, bp.enabled = "i < 0", False  # `disable 1`
    assert cache.all_false(frame.f_code.co_filename, frame.f_lineno, frame)
    assert bp.hits == 3  # a disabled breakpoint counts no hit
    _clear()
    gen.close()


def test_one_conditional_breakpoint_changed_at_the_prompt(mods):
    target, _ = mods
    loop = target.LINES["loop"]
    commands = [f"b {target.__file__}:{loop}, i == 2", "c", "p i", "b", "condition 1 no_such_name", "c", "p i",
                "condition 1 i == 1", "c", "p i", "disable 1", "enable 1", "condition 1 i > 0", "ignore 1 1",
                "c", "p i", "b", "disable 1", "c"]
    fast, text = both(target.work, commands, 4)
    # work(4) runs helper(4) (i = 0..3), then helper(5) (i = 0..4). Stops: i == 2 in helper(4); the raising
    # condition at the next crossing (i == 3); i == 1 in helper(5); i > 0 once ignored (i == 2), so i == 3
    assert stops(text) == ["work:15"] + [f"helper:{loop}"] * 4
    assert [line for line in text.splitlines() if line.isdigit()] == ["2", "3", "1", "3"]
    assert "breakpoint already hit 8 times" in text  # every enabled crossing counted, as pdb counts
    if MONITORING:
        # only the crossings where pdb stops, or decides (the ignored true one), reach pdb
        assert fast.delivered.count(("line", "helper", loop)) == 5, fast.delivered


def test_false_condition_never_reaches_pdb(mods):
    target, _ = mods
    loop = target.LINES["loop"]
    fast, text = both(target.work, [f"b {target.__file__}:{loop}, i < 0", "c"], 6)
    assert stops(text) == ["work:15"]
    if MONITORING:
        assert ("line", "helper", loop) not in fast.delivered
