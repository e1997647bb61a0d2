"""Fast breakpoints leave code as they found it, and never break ``torch.compile``: a cleared breakpoint
gives every function its original (marshal-able) code back; a function wrapped by ``torch.compile`` is
traced instead of hooked, so dynamo never sees a hook (3.11), and the session equals pdb's."""

from __future__ import annotations

import marshal

import pytest

from breakpoint_sessions import FastPdb, StockPdb, both, load, run_session, stops
from breakpoint_sessions import fresh_breakpoints, mods  # noqa: F401  (fixtures)

RESTORE = '''\
import marshal

SEEN = []


def helper(n):
    total = 0
    for i in range(n):
        total += i  # L:loop
    return total


def other(n):
    return n + 1  # L:other


ORIGINAL = helper.__code__


def driver(n):
    first = helper(n)  # L:first
    SEEN.append(helper.__code__ is ORIGINAL)
    SEEN.append(len(marshal.dumps(helper.__code__)) > 0)
    return first + helper(n) + other(n)
'''

COMPILED = '''\
import marshal

import torch

SEEN = []


def body(x):
    a = x + 1  # L:body
    return a * 3


compiled = torch.compile(body, backend="eager")


def driver():
    first = compiled(torch.ones(2))  # L:first
    second = compiled(torch.ones(2) * 2)
    SEEN.append(len(marshal.dumps(body.__code__)) > 0)
    return float(first.sum() + second.sum())
'''


NOTE = "*** llmpdb fast breakpoints: body ("
CANNOT_STOP = "a breakpoint cannot stop inside compiled code"


def both_but_the_note(func, commands):
    """Stock and fast transcripts, equal but for the engine's one note that it traces ``body``."""
    _, stock, stock_result = run_session(StockPdb, func, commands)
    fast, text, result = run_session(FastPdb, func, commands)
    notes = [line for line in text.splitlines() if line.startswith(NOTE)]
    # 3.11's hook engine traces the code instead; 3.12+'s monitoring engine only says it
    assert len(notes) == 1 and notes[0].endswith(("runs under torch.compile: traced instead of hooked; " + CANNOT_STOP,
                                                   "runs under torch.compile; " + CANNOT_STOP)), notes
    assert "\n".join(line for line in text.splitlines() if not line.startswith(NOTE)) == stock.rstrip("\n")
    assert result == stock_result
    return fast, text


def _marshal_or_error(code) -> str:
    try:
        marshal.dumps(code)
    except ValueError as exc:
        return f"{type(exc).__name__}: {exc}"
    return "ok"


@pytest.mark.parametrize("keep_other", [False, True])
def test_clearing_the_breakpoint_gives_the_original_code_back(tmp_path, keep_other):
    target = load(tmp_path, f"bp_restore_{keep_other}", RESTORE)
    loop, other = target.LINES["loop"], target.LINES["other"]
    commands = [f"b {target.__file__}:{loop}"] + ([f"b {target.__file__}:{other}"] if keep_other else [])
    commands += ["c", "p i", "cl 1", "c"] + (["c"] if keep_other else [])
    fast, text = both(target.driver, commands, 3)
    assert stops(text)[1] == f"helper:{loop}"
    # under pdb and under the engine, after ``cl`` the function runs its original code, marshal-able
    assert target.SEEN == [True, True, True, True]
    assert _marshal_or_error(target.helper.__code__) == "ok"


def test_breakpoint_in_a_torch_compiled_function(tmp_path):
    pytest.importorskip("torch")
    target = load(tmp_path, "bp_compiled", COMPILED)
    body, first = target.LINES["body"], target.LINES["first"]
    fast, text = both_but_the_note(target.driver, [f"b {target.__file__}:{body}", "c", "c", "c"])
    assert "Error" not in text and "Traceback" not in text
    assert target.SEEN == [True, True]  # under pdb, then the engine: ran to its end, code marshal-able
    assert stops(text)[0] == f"driver:{first}"
    assert _marshal_or_error(target.body.__code__) == "ok"


def test_breakpoint_in_a_torch_compiled_function_set_at_a_stop_then_cleared(tmp_path):
    pytest.importorskip("torch")
    target = load(tmp_path, "bp_compiled_clear", COMPILED)
    body, first = target.LINES["body"], target.LINES["first"]
    commands = [f"b {target.__file__}:{first + 1}", "c", f"b {target.__file__}:{body}", "c", "cl", "y", "c"]
    fast, text = both_but_the_note(target.driver, commands)
    assert "Error" not in text and "Traceback" not in text
    assert stops(text)[:2] == [f"driver:{first}", f"driver:{first + 1}"]
    assert target.SEEN == [True, True]
