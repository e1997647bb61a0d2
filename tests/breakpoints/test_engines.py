"""Fast breakpoints keep pdb's meaning while continuing: each session runs under pdb and under the mixin
and the transcripts must be equal; each test also checks its stops and what the engine delivered.
No torch needed (except the torch.compile test): the debuggee is plain Python in temp files."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import io
import re
import sys
import threading

import pytest

from breakpoint_sessions import CLOSURES, FastPdb, StockPdb, both, clear_breakpoints, load, run_session, stops
from breakpoint_sessions import fresh_breakpoints, mods  # noqa: F401  (fixtures)
from llmpdb.breakpoints import CONTINUE, engine_kind

def test_engine_kind_matches_python_version():
    assert engine_kind() == ("monitoring" if sys.version_info >= (3, 12) else "hooks")


def test_breakpoint_in_another_function_hits_each_time_with_locals(mods):
    target, _ = mods
    loop = target.LINES["loop"]
    fast, text = both(target.work, [f"b {target.__file__}:{loop}", "c", "p i, total", "c", "p i, total",
                                    "cl 1", "c"], 3)
    assert stops(text) == ["work:15", f"helper:{loop}", f"helper:{loop}"]
    assert "(0, 0)\n" in text and "(1, 0)\n" in text
    assert CONTINUE in fast.modes_seen
    assert fast.delivered == [("line", "helper", loop), ("line", "helper", loop)]


def test_no_trace_function_while_continuing(mods):
    target, _ = mods
    ret = target.LINES["traced"] + 1
    fast, text = both(target.calls_traced, [f"b {target.__file__}:{ret}, n == 3", "c", "p n", "b", "c"], 4)
    assert stops(text) == [f"calls_traced:{target.LINES['calls-traced-end'] - 1}", f"traced_helper:{ret}"]
    assert target.TRACES == [None] * 4  # no sys.settrace function while continuing to the breakpoint
    assert "breakpoint already hit 4 times" in text  # every crossing counted, as pdb counts them
    # sys.monitoring: false conditions are evaluated in the callback, pdb hears of the true one only
    expected = 1 if engine_kind() == "monitoring" else 4
    assert fast.delivered.count(("line", "traced_helper", ret)) == expected


def test_breakpoint_in_the_running_frame_falls_back_to_tracing_on_311(mods):
    target, _ = mods
    end = target.LINES["calls-traced-end"]
    fast, text = both(target.calls_traced, [f"b {end}", "c", "c"], 4)
    assert stops(text) == [f"calls_traced:{end - 1}", f"calls_traced:{end}"]
    if engine_kind() == "monitoring":
        assert target.TRACES == [None] * 4
    else:  # calls_traced was already running its original code: a trace function watches it
        assert all(t is not None for t in target.TRACES)
    assert fast.delivered == [("line", "calls_traced", end)]


def test_condition(mods):
    target, _ = mods
    loop = target.LINES["loop"]
    fast, text = both(target.work, [f"b {target.__file__}:{loop}, i == 2", "c", "p i, total", "c", "p i", "c"], 4)
    assert stops(text) == ["work:15", f"helper:{loop}", f"helper:{loop}"]
    assert "(2, 1)\n" in text and "\n2\n" in text


def test_ignore_count(mods):
    target, _ = mods
    loop = target.LINES["loop"]
    _, text = both(target.work, [f"b {target.__file__}:{loop}", "ignore 1 3", "c", "p i", "cl 1", "c"], 3)
    assert "Will ignore next 3 crossings of breakpoint 1." in text
    assert stops(text) == ["work:15", f"helper:{loop}"]
    assert "\n0\n" in text  # the 4th crossing: second call to helper, i == 0


def test_temporary_breakpoint_stops_once(mods):
    target, _ = mods
    loop = target.LINES["loop"]
    fast, text = both(target.work, [f"tbreak {target.__file__}:{loop}", "c", "p i", "c"], 3)
    assert stops(text) == ["work:15", f"helper:{loop}"]
    assert "Deleted breakpoint 1" in text
    assert fast.fast_breakpoints_mode() in ("off", "stock")


def test_breakpoint_set_while_stopped_in_another_file(mods):
    target, other = mods
    line = other.LINES["other"]

    def driver():
        target.work(2)
        return other.other(5)

    driver.__globals__["TRACES"] = []
    fast, text = both(driver, [f"b {other.__file__}:{line}", "c", "p v", "c"])
    assert stops(text)[-1] == f"other:{line}"
    assert "\n5\n" in text
    assert fast.delivered == [("line", "other", line)]


def test_breakpoint_in_function_already_running(mods):
    target, _ = mods
    late = target.LINES["running-late"]
    fast, text = both(target.long_running, [f"b {late}", "c", "p total", "c"], 50)
    assert stops(text) == [f"long_running:{target.LINES['running-loop'] - 2}", f"long_running:{late}"]
    assert "\n1225\n" in text
    assert fast.delivered == [("line", "long_running", late)]


def test_clear_disable_enable(mods):
    target, _ = mods
    loop = target.LINES["loop"]
    ret = target.LINES["work-return"]
    commands = [f"b {target.__file__}:{loop}", f"b {ret}", "disable 1", "c", "enable 1", "cl 2",
                f"b {target.LINES['work-c']}", "c"]
    _, text = both(target.work, commands, 2)
    assert "Disabled breakpoint 1" in text and "Enabled breakpoint 1" in text and "Deleted breakpoint 2" in text
    assert stops(text) == ["work:15", f"work:{ret}"]  # bp 1 re-enabled after helper ran; bp 3 set after too


def test_function_breakpoint(mods):
    target, _ = mods
    _, text = both(target.work, ["b helper", "c", "p n", "c", "p n", "c"], 2)
    assert stops(text) == ["work:15", f"helper:{target.LINES['loop'] - 2}", f"helper:{target.LINES['loop'] - 2}"]
    assert "\n2\n" in text and "\n3\n" in text


def test_breakpoint_through_a_decorator(mods):
    target, _ = mods
    line = target.LINES["decorated"]

    def driver():
        return target.decorated(4)

    fast, text = both(driver, [f"b {target.__file__}:{line}", "c", "p x", "where", "c"])
    assert stops(text)[-1] == f"decorated:{line}"
    assert "\n4\n" in text and "wrapper()" in text
    assert fast.delivered == [("line", "decorated", line)]


def test_breakpoint_through_torch_compile_disabled(mods):
    torch = pytest.importorskip("torch")
    target, _ = mods
    line = target.LINES["decorated"]
    compiled = torch.compiler.disable(target.decorated)

    def driver():
        return compiled(6)

    fast, text = both(driver, [f"b {target.__file__}:{line}", "c", "p x", "c"])
    assert stops(text)[-1] == f"decorated:{line}"
    assert "\n6\n" in text
    assert ("line", "decorated", line) in fast.delivered


def test_breakpoint_in_generator_body(mods):
    target, _ = mods
    line = target.LINES["gen-yield"]
    fast, text = both(target.consume, [f"b {target.__file__}:{line}", "c", "p i", "c", "p i", "c", "c"], 3)
    assert stops(text).count(f"gen:{line}") == 3
    assert "\n0\n" in text and "\n1\n" in text


def test_breakpoint_at_module_level(tmp_path):
    path = tmp_path / "bp_script.py"
    path.write_text("a = 1\nb = 2\nfor k in range(3):\n    a += k\nc = a + b\n")
    code = compile(path.read_text(), str(path), "exec")
    for cls in (StockPdb, FastPdb):
        clear_breakpoints()
        out = io.StringIO()
        debugger = cls(stdin=io.StringIO("b 4\nc\np k\nc\np k\ncl 1\nc\n"), stdout=out, nosigint=True, readrc=False)
        debugger.run(code, {"__name__": "bp_script"})
        text = out.getvalue().replace("(Pdb) ", "(Pdb)\n")
        assert stops(text) == ["<module>:1", "<module>:4", "<module>:4"], (cls, text)
        assert "\n0\n" in text and "\n1\n" in text


def test_breakpoint_commands_run_at_fast_stops(mods):
    target, _ = mods
    loop = target.LINES["loop"]
    commands = [f"b {target.__file__}:{loop}", "commands 1", "silent", "p 'hit', i", "end", "c", "c", "cl 1", "c"]
    _, text = both(target.work, commands, 2)
    assert text.count("('hit', ") >= 2


def test_other_threads_do_not_stop(mods):
    target, _ = mods
    loop = target.LINES["loop"]

    def driver():
        worker = threading.Thread(target=target.helper, args=(3,))
        worker.start()
        worker.join()
        return target.helper(2)

    fast, text = both(driver, [f"b {target.__file__}:{loop}", "c", "p i", "c", "p i", "c"])
    assert stops(text).count(f"helper:{loop}") == 2
    assert all(event == ("line", "helper", loop) for event in fast.delivered)


def test_post_mortem_leaves_nothing_armed(mods):
    target, _ = mods
    loop = target.LINES["loop"]
    try:
        target.helper(None)
    except TypeError:
        tb = sys.exc_info()[2]
    for cls in (StockPdb, FastPdb):
        clear_breakpoints()
        out = io.StringIO()
        debugger = cls(stdin=io.StringIO(f"b {target.__file__}:{loop}\np n\nc\n"), stdout=out, nosigint=True,
                       readrc=False)
        debugger.reset()
        debugger.interaction(None, tb)
        assert "None" in out.getvalue()
    assert sys.gettrace() is None


def test_breakpoint_in_a_caller_on_the_stack(mods):
    target, _ = mods
    loop = target.LINES["loop"]
    line_c = target.LINES["work-c"]
    fast, text = both(target.work, [f"b {target.__file__}:{loop}", "c", f"b {line_c}", "cl 1", "c", "p a, b", "c"], 2)
    assert stops(text) == ["work:15", f"helper:{loop}", f"work:{line_c}"]
    assert "(1, 3)" in text
    assert ("line", "work", line_c) in fast.delivered


def test_breakpoint_in_a_file_imported_later(mods, tmp_path):
    target, _ = mods
    late = tmp_path / "bp_late_module.py"
    late.write_text("def late(x):\n    y = x * 7\n    return y\n")

    def driver():
        spec = importlib.util.spec_from_file_location("bp_late_module", late)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        target.work(2)
        return module.late(3)

    fast, text = both(driver, [f"b {late}:3", "c", "p y", "c"])
    assert stops(text)[-1] == "late:3"
    assert "\n21\n" in text
    assert fast.delivered == [("line", "late", 3)]


def test_breakpoint_in_a_closure_made_by_a_running_loop(tmp_path):
    module = load(tmp_path, "bp_closures_a", CLOSURES)
    line = module.LINES["closure"]
    commands = ["n", f"b {module.__file__}:{line}, step == 2", "c", "p k, step", "c"]
    fast, text = both(module.make_and_call, commands, 3)
    assert stops(text)[-1] == f"closure:{line}"
    assert "(10, 2)" in text


def test_breakpoint_in_a_suspended_generator(tmp_path):
    module = load(tmp_path, "bp_closures_b", CLOSURES)
    pause = module.LINES["pause"]
    line = module.LINES["gen-values"]
    commands = [f"b {pause}", "c", f"b {line}", "cl 1", "c", "p i", "c", "p i", "c"]
    fast, text = both(module.suspended, commands, 3)
    assert stops(text)[1:] == [f"pause:{pause}", f"gen_values:{line}", f"gen_values:{line}"]
    assert "\n1\n" in text and "\n2\n" in text


def test_functions_get_their_code_back(mods):
    target, _ = mods
    original = target.helper.__code__
    loader_get_code = importlib.machinery.SourceFileLoader.get_code
    fast, _ = both(target.work, [f"b {target.__file__}:{target.LINES['loop']}", "c", "c", "c", "c"], 2)
    assert target.helper.__code__ is original
    assert importlib.machinery.SourceFileLoader.get_code is loader_get_code
    assert sys.gettrace() is None


def test_session_started_by_set_trace(mods):
    target, _ = mods
    loop = target.LINES["loop"]
    commands = [f"b {target.__file__}:{loop}, i == 2", "c", "p i, total", "c"]

    def entry(debugger):
        debugger.set_trace()
        value = target.helper(4)
        return value

    outputs = []
    for cls in (StockPdb, FastPdb):
        clear_breakpoints()
        out = io.StringIO()
        debugger = cls(stdin=io.StringIO("\n".join(commands) + "\n"), stdout=out, nosigint=True, readrc=False)
        try:
            assert entry(debugger) == 6
        finally:
            sys.settrace(None)
            if isinstance(debugger, FastPdb):
                assert debugger.fast_breakpoints_mode() == CONTINUE
                debugger.fast_breakpoints_close()
        outputs.append(re.sub(r"0x[0-9a-f]+", "0x?", out.getvalue()))
    assert outputs[0] == outputs[1]
    assert "(2, 1)" in outputs[1]


@pytest.mark.skipif(engine_kind() != "hooks", reason="the hook compiler is the 3.11 engine")
def test_code_that_cannot_be_hooked_is_traced_and_reported(mods, monkeypatch):
    import llmpdb.breakpoints.patching as patching

    target, _ = mods
    loop = target.LINES["loop"]
    monkeypatch.setattr(patching, "instrument", lambda code, lines, hook: None)
    fast, text, result = run_session(FastPdb, target.work, [f"b {target.__file__}:{loop}, i == 1", "c", "p i",
                                                             "cl 1", "c"], 3)
    assert result == 9
    assert stops(text) == ["work:15", f"helper:{loop}"]
    assert "*** llmpdb fast breakpoints: helper (" in text and "traced instead" in text
    assert "\n1\n" in text


@pytest.fixture
def trace_engine_only(monkeypatch):
    """Force the lean trace engine: take every monitoring tool id llmpdb may use (3.12+), or, on 3.11,
    ask for it instead of the hook engine."""
    import llmpdb.breakpoints.mixin as breakpoints

    taken = []
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None:
        from llmpdb.breakpoints.monitoring import TOOL_IDS

        for tool in TOOL_IDS:
            if monitoring.get_tool(tool) is None:
                monitoring.use_tool_id(tool, "busy-test-tool")
                taken.append(tool)
    else:
        monkeypatch.setattr(breakpoints, "engine_kind", lambda: "trace")
    yield
    for tool in taken:
        monitoring.free_tool_id(tool)


def test_lean_trace_engine_keeps_pdb_meaning(mods, trace_engine_only):
    from llmpdb.breakpoints.trace import TraceEngine

    target, _ = mods
    loop = target.LINES["loop"]
    commands = [f"b {target.__file__}:{loop}, i == 1", "c", "p i, total", "n", "n", "c", f"b {target.LINES['work-c']}",
                "c", "p a, b", "c", "c"]
    fast, text = both(target.work, commands, 3)
    assert type(fast._fb_state()["engine"]) is TraceEngine
    assert stops(text) == ["work:15", f"helper:{loop}", f"helper:{loop - 1}", f"helper:{loop}", f"helper:{loop}",
                           f"work:{target.LINES['work-c']}"]
    assert "(1, 0)" in text and "(3, 6)" in text


def test_breakpoint_in_code_exec_compiled_later(mods, tmp_path):
    target, _ = mods
    source = tmp_path / "bp_exec_source.py"
    source.write_text("def tripled(x):\n    y = x * 3\n    return y\n")

    def driver():
        namespace: dict = {}
        exec(compile(source.read_text(), str(source), "exec"), namespace)
        first = namespace["tripled"](2)
        return first + namespace["tripled"](5)

    fast, text = both(driver, [f"b {source}:3", "c", "p y", "c", "p y", "c"])
    assert stops(text)[1:] == ["tripled:3", "tripled:3"]
    assert "\n6\n" in text and "\n15\n" in text
    assert fast.delivered == [("line", "tripled", 3), ("line", "tripled", 3)]


def test_second_set_trace_in_the_same_session(mods):
    """A second ``set_trace`` (the next ``breakpoint()``) while continuing to breakpoints. pdb, whose trace
    function is still installed then, stops inside bdb's own ``_set_stopinfo`` (``reset`` clears ``botframe``
    and the next call event re-sets it); with the engine no trace function runs there, so the stop is the
    ``set_trace`` caller's next line, as intended."""
    target, _ = mods
    loop = target.LINES["loop"]
    commands = [f"b {target.__file__}:{loop}, i == 1", "c", "p 'first', total", "c", "p first", "c",
                "p 'second', total", "c"]

    def entry(debugger):
        first = target.helper(3)
        debugger.set_trace()
        return first + target.helper(2)

    clear_breakpoints()
    out = io.StringIO()
    debugger = FastPdb(stdin=io.StringIO("\n".join(commands) + "\n"), stdout=out, nosigint=True, readrc=False)
    try:
        debugger.set_trace()
        assert entry(debugger) == 4
    finally:
        sys.settrace(None)
        debugger.fast_breakpoints_close()
    text = out.getvalue().replace("(Pdb) ", "(Pdb)\n")
    assert "bdb.py" not in text
    # 3.13's set_trace steps by instruction: it stops on the rest of the set_trace line itself
    after = entry.__code__.co_firstlineno + (2 if sys.version_info >= (3, 13) else 3)
    assert stops(text)[1:] == [f"helper:{loop}", f"entry:{after}", f"helper:{loop}"]
    assert "('first', 0)" in text and "\n3\n" in text and "('second', 0)" in text


def test_fewer_breakpoints_rearm_without_a_heap_walk(mods, monkeypatch):
    """A ``tbreak`` that fired (breakpoints now a subset of before) re-hooks the functions hooked before:
    one ``gc.get_objects`` pass for the whole session on 3.11, and the same stops as pdb."""
    import gc

    target, _ = mods
    loop, ret = target.LINES["loop"], target.LINES["helper-return"]
    walks = []
    real = gc.get_objects
    monkeypatch.setattr(gc, "get_objects", lambda *a: walks.append(1) or real(*a))
    commands = [f"tbreak {target.__file__}:{loop}", f"b {target.__file__}:{ret}", "c", "p i", "n", "c", "p total",
                "c", "p total", "c"]
    fast, text = both(target.work, commands, 2)
    assert stops(text) == ["work:15", f"helper:{loop}", f"helper:{loop - 1}", f"helper:{ret}", f"helper:{ret}"]
    assert "\n1\n(Pdb)" in text and "\n3\n(Pdb)" in text  # helper(2), then helper(3), each stopped at return
    if engine_kind() == "hooks":
        assert len(walks) == 1
