"""The stop pipeline (llmpdb/debugger/pipeline.py): one ordered list of stages, one event dispatcher, and the
same transcript from the fast engine and from pdb's own tracing with catch, mute and watch armed. Torch-free:
CI runs this file on Python 3.11, 3.12 and 3.13 (tests/debugger/test_engine_sessions.py adds bm and nan-break).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from llmpdb.breakpoints.catching import CATCHES
from llmpdb.debugger.core import Pdb
from llmpdb.debugger.pipeline import EVENT_CONSUMERS, STOP_PIPELINE, StopPipeline
from transcript import debug_transcript

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OURS = [k for k in Pdb.__mro__ if k.__module__.startswith("llmpdb.")]


@pytest.fixture(autouse=True)
def no_catch_left():
    CATCHES.reset()
    yield
    CATCHES.reset()


def test_the_stages_are_one_list_in_order():
    assert [name for name, _ in STOP_PIPELINE] == [
        "host capture", "ranks", "catch", "explain", "step request", "thread gate", "headless policy", "streams",
        "stop state"]
    for _, method in (*STOP_PIPELINE, *EVENT_CONSUMERS):
        assert callable(getattr(Pdb, method, None)), method


def test_no_class_of_ours_but_the_pipeline_defines_interaction():
    """Base-class order no longer decides what a stop does: one ``interaction``, and it is the pipeline's."""
    defining = [k.__name__ for k in OURS if "interaction" in vars(k)]
    assert defining == ["StopPipeline"]
    assert Pdb.__mro__[Pdb.__mro__.index(StopPipeline) + 1].__module__ in ("pdb", "pdbpp")


def test_no_event_consumer_sits_in_front_of_the_engine():
    """The fast engine hands events to ``super().trace_dispatch``: every consumer must come after it."""
    defining = [k.__name__ for k in OURS if "trace_dispatch" in vars(k)]
    assert defining in (["FastBreakpointsMixin", "StopPipeline"], ["StopPipeline"])


def looping(log):
    for i in range(3):
        breakpoint()
        log.append(i)
    return log


def test_a_stop_runs_the_stages_in_the_listed_order():
    seen = []

    class Recording(Pdb):
        pass

    for name, method in STOP_PIPELINE:
        def stage(self, stop, proceed, _name=name, _method=method):
            seen.append(_name)
            return getattr(Pdb, _method)(self, stop, proceed)
        setattr(Recording, method, stage)

    import io

    from llmpdb import hooks

    out = io.StringIO()
    debugger = Recording(stdin=io.StringIO("c\nc\nc\nc\n"), stdout=out, nosigint=True, readrc=False,
                         headless_tour=[], width=100, color=False)
    previous, hook = hooks._DEBUGGER, sys.breakpointhook
    hooks.set_debugger(debugger)
    hooks.install()
    try:
        debugger.runcall(looping, [])
    finally:
        sys.settrace(None)
        hooks.set_debugger(previous)
        sys.breakpointhook = hook
    names = [name for name, _ in STOP_PIPELINE]
    assert seen and len(seen) % len(names) == 0
    assert seen == names * (len(seen) // len(names))


def raising(log):
    breakpoint()
    try:
        raise ValueError("boom")
    except ValueError:
        log.append("handled")
    return log


def test_next_onto_a_raise_in_this_frame_is_the_catch_stop_once():
    """The bug that proved the MRO wrong: with the fast engine on 3.11, `n` onto a raise showed pdb's plain
    exception stop and the catch counted 0 hits (the engine's super() skipped the catch)."""
    out = debug_transcript(raising, ["catch ValueError", "n", "n", "n", "catch", "p log", "c"], [])
    assert out.count("ValueError: boom") == 1, out
    assert "catch 1: ValueError: boom  (raised here; no handler ran yet)" in out
    table = out.split("(llmpdb) ")[5]
    assert table.splitlines()[1].split() == ["1", "ValueError", "1"], table


SCRIPTS = {
    "catch": ("""\
        def main():
            log = []
            breakpoint()
            try:
                raise ValueError("boom")
            except ValueError:
                log.append("handled")
            return log

        print(main())
        """, "catch ValueError\nn\nn\nn\ncatch\nc\n"),
    "catch, continue": ("""\
        def inner(i):
            if i == 1:
                raise KeyError(i)
            return i

        def main():
            out = []
            breakpoint()
            for i in range(3):
                try:
                    out.append(inner(i))
                except KeyError:
                    out.append("k")
            return out

        print(main())
        """, "catch KeyError\nc\nw\np i\nc\n"),
    "mute": ("""\
        def main():
            total = 0
            for i in range(4):
                breakpoint()
                total += i
            return total

        print(main())
        """, "p i\nmute HERE\nc\n"),
    "watch": ("""\
        def main():
            x = [1]
            breakpoint()
            x = x + [2]
            x = "three"
            y = len(x)
            return y

        print(main())
        """, "watch x\nn\nn\nn\nwatch\nc\n"),
    "breakpoint and step": ("""\
        def helper(n):
            total = 0
            for i in range(n):
                total += i
            return total

        def main():
            breakpoint()
            a = helper(3)
            return a

        print(main())
        """, "b helper\nc\nn\nn\nr\nn\nc\n"),
}


def _session(tmp_path, name: str, fast: str) -> str:
    source, commands = SCRIPTS[name]
    script = tmp_path / "session.py"
    script.write_text(textwrap.dedent(source))
    env = {**os.environ, "PYTHONPATH": ROOT, "PYTHONBREAKPOINT": "llmpdb.set_trace", "NO_COLOR": "1",
           "LLMPDB_FAST_BREAKPOINTS": fast, "PDBPP_HIJACK_PDB": "0"}
    env.pop("LLMPDB_HEADLESS", None)
    result = subprocess.run([sys.executable, str(script)], input=commands, env=env, capture_output=True,
                            text=True, timeout=60)
    return result.stdout + result.stderr


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_one_transcript_with_the_engine_and_with_pdbs_tracing(tmp_path, name):
    fast, stock = _session(tmp_path, name, "1"), _session(tmp_path, name, "0")
    assert "Traceback" not in fast and "internal error" not in fast, fast
    assert fast == stock
    assert fast.count("(llmpdb) ") >= len(SCRIPTS[name][1].splitlines())


def _divide(x):
    return x / 0


def test_interaction_given_the_exception_itself_stops_in_the_raising_frame():
    """IPython's ``%debug`` calls ``interaction(None, sys.last_value)`` on every Python: before 3.13 pdb's
    own interaction wants a traceback (the standard base died: no attribute 'tb_frame')."""
    import io

    try:
        _divide(7)
    except ZeroDivisionError as exc:
        caught = exc
    out = io.StringIO()
    debugger = Pdb(stdin=io.StringIO("p x * 1000 + 1\nq\n"), stdout=out, nosigint=True, readrc=False,
                   headless_tour=[], width=100, color=False)
    try:
        debugger.reset()
        debugger.interaction(None, caught)
    finally:
        sys.settrace(None)
    assert "_divide()" in out.getvalue() and "7001" in out.getvalue(), out.getvalue()
