"""Stepping keeps pdb's meaning around fast breakpoints: next/until/return/jump/step, exceptions,
generators, quit, ``debug`` and the pdb++ base; each session runs under pdb and under the mixin."""

from __future__ import annotations

import re
import sys

import pytest

from breakpoint_sessions import FastPdb, both, load, run_session, stops
from breakpoint_sessions import fresh_breakpoints, mods  # noqa: F401  (fixtures)
from llmpdb.breakpoints import CONTINUE, WATCH, FastBreakpointsMixin

def test_disable_then_enable_while_helper_runs(mods):
    target, _ = mods
    loop = target.LINES["loop"]
    commands = [f"b {target.__file__}:{loop}", "c", "disable 1", "c"]
    _, text = both(target.work, commands, 3)
    assert stops(text) == ["work:15", f"helper:{loop}"]
    commands = [f"b {target.__file__}:{loop}", "disable 1", "n", "enable 1", "c", "p i", "c", "p i", "cl 1", "c"]
    _, text = both(target.work, commands, 2)
    assert stops(text) == ["work:15", "work:16", f"helper:{loop}", f"helper:{loop}"]


def test_step_into_function_after_continuing_past_breakpoints(mods):
    target, _ = mods
    loop = target.LINES["loop"]
    commands = [f"b {target.__file__}:{loop}, i == 1", f"b {target.LINES['work-b']}", "c", "c", "s", "s", "s",
                "p n", "n", "n", "c", "c"]
    fast, text = both(target.work, commands, 3)
    assert stops(text)[:6] == ["work:15", f"helper:{loop}", "work:16", "helper:7", "helper:8", "helper:9"]
    assert "--Call--" in text and "\n4\n" in text
    assert {CONTINUE} <= fast.modes_seen


def test_next_over_calls_with_a_breakpoint_inside(mods):
    target, _ = mods
    loop = target.LINES["loop"]
    fast, text = both(target.work, ["n", f"b {target.__file__}:{loop}, i == 2", "n", "p i", "cl 1", "r", "n",
                                    "n", "n", "n"], 3)
    assert stops(text)[:5] == ["work:15", "work:16", f"helper:{loop}", f"helper:{loop + 1}", "work:17"]
    assert "--Return--" in text
    assert WATCH in fast.modes_seen
    assert ("line", "helper", loop) in fast.delivered


def test_next_return_until_in_recursion(mods):
    target, _ = mods
    commands = ["n", "n", "s", "n", "n", "r", "n", "until", "n", "c"]
    fast, text = both(target.fib, commands, 4)
    assert "--Return--" in text
    assert WATCH in fast.modes_seen


def test_until_leaves_a_loop(mods):
    target, _ = mods
    loop = target.LINES["loop"]
    commands = [f"b {target.__file__}:{loop}", "c", "cl 1", "n", "until", "until", "p total", "c"]
    fast, text = both(target.work, commands, 4)
    assert stops(text)[-1] == f"helper:{target.LINES['helper-return']}"
    assert "\n6\n" in text
    assert WATCH in fast.modes_seen


def test_return_then_next_goes_to_caller(mods):
    target, _ = mods
    loop = target.LINES["loop"]
    commands = [f"tbreak {target.__file__}:{loop}", "c", "r", "n", "n", "c"]
    _, text = both(target.work, commands, 2)
    assert "--Return--" in text
    assert stops(text) == ["work:15", f"helper:{loop}", f"helper:{loop + 1}", "work:16", "work:17"]


def test_next_at_a_return_stops_in_a_caller_called_while_the_engine_ran(mods):
    # work() is called while the engine runs (pdb traces it: a breakpoint is in its file); `n` at the
    # --Return-- of helper() must stop in work(), not at the next frame pdb's machinery traces (3.12)
    target, _ = mods
    loop, lines = target.LINES["loop"], target.LINES

    def outer(n):
        return target.work(n)

    commands = [f"tbreak {target.__file__}:{loop}", "c", "r", "n", "n", "c"]
    _, text = both(outer, commands, 2)
    assert "--Return--" in text
    assert stops(text)[1:] == [f"helper:{loop}", f"helper:{lines['helper-return']}", f"work:{lines['work-b']}",
                               f"work:{lines['work-c']}"]


RETURNS = """\
import asyncio


def constant():
    x = 1
    return 1  # L:return-const


def calls_constant():
    a = constant()
    return a + 1  # L:after-const


async def leaf(x):
    await asyncio.sleep(0)
    y = x + 1  # L:leaf-body
    return y


async def awaiting():
    a = await leaf(1)  # L:await-1
    b = await leaf(2)  # L:await-2
    return a + b


def run_awaiting():
    return asyncio.run(awaiting())
"""


@pytest.mark.parametrize("commands", [["r", "n"], ["cl 1", "r", "n"], ["n", "n"]], ids=["r", "clear-r", "n"])
def test_return_from_a_line_that_only_returns_a_constant(tmp_path, commands):
    # 3.12+: `return 1` is one RETURN_CONST, and the LINE event that stopped there ran it as instrumented
    # then: events taken off its code at the prompt (a tbreak that fired, a `clear`) lost its return
    target = load(tmp_path, "bp_returns_const", RETURNS)
    line = target.LINES["return-const"]
    _, text = both(target.calls_constant, [f"{'tbreak' if commands[0] != 'cl 1' else 'b'} "
                                           f"{target.__file__}:{line}", "c", *commands, "c"])
    assert "--Return--" in text
    assert stops(text)[1:] == [f"constant:{line}", f"constant:{line}", f"calls_constant:{target.LINES['after-const']}"]


@pytest.mark.skipif(sys.version_info < (3, 12), reason="3.11: the awaiting coroutine's SEND began untraced, "
                    "so the StopIteration pdb stops at in it is never reported (stated in docs/design.md)")
@pytest.mark.parametrize("commands", [["n", "n", "n"], ["r", "n"]], ids=["n", "r"])
def test_next_and_return_out_of_an_awaited_coroutine_reach_the_awaiting_one(tmp_path, commands):
    target = load(tmp_path, "bp_returns_coro", RETURNS)
    line = target.LINES["leaf-body"]
    _, text = both(target.run_awaiting, [f"tbreak {target.__file__}:{line}", "c", *commands, "c"])
    assert f"awaiting:{target.LINES['await-1']}" in stops(text), text


def test_jump(mods):
    target, _ = mods
    x3 = target.LINES["jump-x3"]
    _, text = both(target.jumpy, [f"b {target.LINES['jump-x2']}", "c", f"j {x3}", "p x", "n", "p x", "c"])
    assert f"({x3})jumpy()" in text
    assert "\n1\n" in text and "\n3\n" in text


def test_next_over_a_raising_call(mods):
    target, _ = mods
    commands = ["n", "n", "n", "n", "n", "n", "c"]
    fast, text = both(target.raises_inside, commands)
    assert "TypeError" in text
    assert WATCH in fast.modes_seen


def test_next_over_a_generator_loop(mods):
    target, _ = mods
    commands = ["n", "n", "n", "n", "n", "n", "n", "n", "n", "c"]
    _, text = both(target.consume, commands, 2)
    assert f"consume:{target.LINES['consume-for']}" in stops(text)


def test_breakpoint_on_a_comprehension_line(mods):
    target, _ = mods
    line = target.LINES["comprehension"]
    _, text = both(target.comprehension, ["n", f"b {line}", "c", "c", "c", "c", "c", "c"], 3)
    assert stops(text).count(f"comprehension:{line}") >= 1


def test_quit_releases_everything(mods):
    target, _ = mods
    loop = target.LINES["loop"]
    fast, text = both(target.work, [f"b {target.__file__}:{loop}", "c", "q"], 3)
    assert stops(text) == ["work:15", f"helper:{loop}"]
    assert fast.fast_breakpoints_mode() in ("off", "stock")


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="pdb++ only imports on 3.11 here")
def test_on_pdbpp_base(mods):
    pdbpp = pytest.importorskip("pdbpp")
    target, _ = mods
    loop = target.LINES["loop"]

    class FastPdbpp(FastBreakpointsMixin, pdbpp.Pdb):
        modes: set = set()

        def fb_sync(self, frame):
            local = super().fb_sync(frame)
            self.modes.add(self.fast_breakpoints_mode())
            return local

    # pdb++ evaluates "n"/"c" as the locals n and c of the debuggee: spell the commands out
    commands = [f"break {target.__file__}:{loop}, i == 1", "continue", "p i, total", "next", "next", "continue",
                "continue"]
    _, stock, _ = run_session(pdbpp.Pdb, target.work, commands, 3)
    fast, text, _ = run_session(FastPdbpp, target.work, commands, 3)
    assert text == stock
    plain = re.sub(r"\x1b\[[0-9;]*m", "", stock)
    assert plain.count(f"({loop})helper()") >= 2
    assert {CONTINUE, WATCH} <= FastPdbpp.modes


def test_recursive_debug_command(mods):
    target, _ = mods
    loop = target.LINES["loop"]
    commands = [f"b {target.__file__}:{loop}, i == 1", "c", "debug helper(2)", "c", "c", "p total", "n", "c"]
    fast, text = both(target.work, commands, 2)
    assert "ENTERING RECURSIVE DEBUGGER" in text and "LEAVING RECURSIVE DEBUGGER" in text
    assert sys.gettrace() is None


def test_until_a_line_and_jump_back_in_a_loop(mods):
    target, _ = mods
    loop = target.LINES["loop"]
    ret = target.LINES["helper-return"]
    commands = [f"b {target.__file__}:{loop}, i == 1", "c", "cl 1", f"until {ret}", "p total", f"j {loop - 2}", "n",
                "p total", "c"]
    fast, text = both(target.work, commands, 4)
    assert stops(text) == ["work:15", f"helper:{loop}", f"helper:{ret}", f"helper:{loop - 2}", f"helper:{loop - 1}"]
    assert "\n6\n(Pdb)" in text and "\n0\n(Pdb)" in text  # until ran the loop out; the jump went back before it
    assert WATCH in fast.modes_seen


def test_jump_at_a_breakpoint_in_a_callee(mods):
    target, _ = mods
    x2, x3 = target.LINES["jump-x2"], target.LINES["jump-x3"]

    def driver():
        return target.jumpy()

    fast, text = both(driver, [f"b {target.__file__}:{x2}", "c", f"j {x3}", "p x", "n", "p x", "c"])
    assert stops(text)[1:] == [f"jumpy:{x2}", f"jumpy:{x3}", f"jumpy:{x3 + 1}"]
    assert "\n1\n(Pdb)" in text and "\n3\n(Pdb)" in text
    assert fast.delivered[0] == ("line", "jumpy", x2)


def test_step_onto_a_hooked_breakpoint_line_never_enters_the_hook(mods):
    target, _ = mods
    loop, ret = target.LINES["loop"], target.LINES["helper-return"]
    commands = [f"b {target.__file__}:{loop}, i == 2", f"b {target.__file__}:{ret}", "c", "s", "s", "s", "s",
                "s", "c", "c"]
    _, text = both(target.work, commands, 3)
    assert stops(text)[:5] == ["work:15", f"helper:{loop}", f"helper:{loop - 1}", f"helper:{ret}", f"helper:{ret}"]
    assert "hooked.py" not in text and "patching.py" not in text


def test_conditions_true_false_raising_and_ignored_stop_as_pdb(mods):
    target, _ = mods
    loop = target.LINES["loop"]
    where = f"{target.__file__}:{loop}"
    commands = [f"b {where}, i == 1", f"b {where}, i == 2", "c", "p i", "b", "disable 1", "ignore 2 1", "c", "p i",
                "condition 2 no_such_name > 0", "c", "p i", "b", "cl 1", "cl 2", "c"]
    _, text = both(target.work, commands, 4)
    assert stops(text)[:4] == ["work:15", f"helper:{loop}", f"helper:{loop}", f"helper:{loop}"]
    assert "\n1\n(Pdb)" in text and "breakpoint already hit 2 times" in text  # the second call's i == 2
    assert "NameError" in text or "no_such_name" in text  # a raising condition stops, as in pdb


def test_until_again_and_return_from_one_frame(mods):
    target, _ = mods
    loop = target.LINES["loop"]
    commands = [f"tbreak {target.__file__}:{loop - 2}", "c", "until", "until", "until", "p i, total", "until",
                "until", "p total", "r", "c"]
    fast, text = both(target.work, commands, 5)
    assert stops(text)[:3] == ["work:15", f"helper:{loop - 2}", f"helper:{loop - 1}"]
    assert "--Return--" in text
    assert WATCH in fast.modes_seen


DISPATCH = '''\
import sys
SEEN = []


def call(f, *args):  # as torch's Module._call_impl: every module call runs this code
    result = f(*args)  # L:call
    return result


def leaf(x):
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None:
        SEEN.append(max(monitoring.get_local_events(tool, call.__code__) for tool in range(6)))
    return x + 1


def forward(n):
    total = 0  # L:forward-first
    for i in range(n):
        total += call(leaf, i)
    return total  # L:forward-return


def main(n):
    out = call(forward, n)
    return out * 2
'''


def test_return_out_of_a_forward_watches_the_forward_not_its_dispatcher(tmp_path):
    """``r`` in a function called through a dispatcher that its own body calls again (a forward, called
    through ``Module._call_impl``, calling submodules through it): pdb's stops and transcript, and on
    ``sys.monitoring`` no event is enabled on the dispatcher's code until the forward returns."""
    from breakpoint_sessions import load

    target = load(tmp_path, "bp_dispatch", DISPATCH)
    first, ret = target.LINES["forward-first"], target.LINES["forward-return"]
    commands = [f"b {target.__file__}:{first}", "c", "r", "n", "n", "c"]
    fast, text = both(target.main, commands, 5)
    call_line = target.LINES["call"]
    assert stops(text) == ["main:25", f"forward:{first}", f"forward:{ret}", f"call:{call_line + 1}",
                           f"call:{call_line + 1}"], text
    assert "--Return--" in text and WATCH in fast.modes_seen
    target.SEEN.clear()
    run_session(FastPdb, target.main, commands, 5)
    if sys.version_info >= (3, 12):
        assert target.SEEN == [0] * 5  # the dispatcher's lines and returns cost the forward nothing


def test_return_out_of_a_raising_call_stops_at_its_unwind_then_in_the_caller(mods):
    """``s`` into ``helper(None)`` (it raises), ``r``: pdb stops at helper's end (``--Return--`` with no
    value), then ``n`` goes on in the caller's ``except``; exceptions inside helper itself never stop."""
    target, _ = mods
    commands = ["n", "n", "s", "r", "n", "n", "n", "c"]
    fast, text = both(target.raises_inside, commands)
    call, caught, helper = target.LINES["raise-call"], target.LINES["except"], target.LINES["loop"] - 3
    assert stops(text) == [f"raises_inside:{call - 2}", f"raises_inside:{call - 1}", f"raises_inside:{call}",
                           f"helper:{helper}", f"helper:{helper + 2}", f"raises_inside:{call}",
                           f"raises_inside:{call + 1}", f"raises_inside:{caught}"]
    assert "--Call--" in text and "--Return--" in text and "->None" in text and "TypeError" in text
    assert WATCH in fast.modes_seen
