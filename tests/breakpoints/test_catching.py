"""Exception breakpoints (llmpdb/breakpoints/catching.py, llmpdb/commands/catch.py): where ``catch`` stops, what it
matches, conditions, listing and removal, bad input, and what it costs to leave armed. Torch-free."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from llmpdb.breakpoints.catching import CATCHES, TOOL_NAME, exception_matches, valid_pattern
from transcript import debug_transcript

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def no_catch_left():
    CATCHES.reset()
    yield
    CATCHES.reset()


def inner(x):
    y = x * 2
    raise ValueError(f"bad {y}")


def outer(log):
    try:
        inner(3)
    except ValueError:
        log.append("handled")
    return log


def twice(log):
    for word in ("first", "second"):
        try:
            raise ValueError(word)
        except ValueError:
            log.append(word)
    return log


def test_patterns_match_any_class_of_the_mro():
    class ShapeError(RuntimeError):
        pass

    assert exception_matches("RuntimeError", ShapeError)
    assert exception_matches("*Error", KeyError)
    assert exception_matches("builtins.Key*", KeyError)
    assert not exception_matches("*Error", StopIteration)
    assert not exception_matches("*", object().__class__)  # object itself never counts
    assert valid_pattern("torch.*Error") and not valid_pattern("a b") and not valid_pattern("x-y")


def test_stops_in_the_raising_frame_before_the_handler_and_once():
    log: list = []
    out = debug_transcript(outer, ["catch ValueError", "c", "p y", "up", "p log", "down", "where", "c"], log)
    assert "catch 1: ValueError: bad 6  (raised here; no handler ran yet)" in out
    assert out.count("catch 1: ValueError: ") == 1  # not again while it passes through outer()
    answers = out.split("(llmpdb) ")
    assert answers[3].strip() == "6"  # p y, in inner()
    assert answers[5].strip() == "[]"  # the except in outer() has not run
    assert "raise ValueError" in answers[7].splitlines()[-1]
    assert log == ["handled"]


def test_condition_sees_the_exception_as_e():
    out = debug_transcript(twice, ["catch ValueError if e.args[0] == 'second'", "c", "p word", "c"], [])
    assert out.count("catch 1: ValueError: ") == 1
    assert "catch 1: ValueError: second" in out
    assert "'second'" in out.split("(llmpdb) ")[3]


def test_a_condition_that_raises_stops_and_says_so():
    out = debug_transcript(outer, ["catch ValueError if nosuch > 1", "c", "c"], [])
    assert "*** condition 'nosuch > 1' raised NameError: name 'nosuch' is not defined; stopping" in out


def test_listing_removal_and_bad_input_are_one_line_each():
    out = debug_transcript(outer, ["catch", "catch KeyError", "catch *Error if 'x' in str(e)", "catch",
                                   "uncatch 1", "uncatch 9", "uncatch", "catch a b", "catch x-y",
                                   "catch X if x ==", "catch", "uncatch all", "catch", "c"], [])
    assert "no exception breakpoints (catch PATTERN sets one)" in out
    assert "num  pattern                          hits" in out
    assert "2    *Error if 'x' in str(e)          0" in out
    assert "removed catch 1: KeyError" in out
    assert "*** uncatch: no exception breakpoint 9 (catch lists them)" in out
    assert "*** uncatch: usage: uncatch N|all" in out
    assert "*** catch: usage: catch PATTERN [if CONDITION]" in out
    assert "*** catch: bad pattern 'x-y': a class name or a glob such as *Error" in out
    assert "*** catch: invalid condition 'x ==':" in out
    assert "removed catch 2: *Error" in out
    assert out.count("no exception breakpoints") == 2


def test_errors_of_commands_typed_at_the_prompt_never_stop():
    out = debug_transcript(outer, ["catch NameError", "p nosuch", "c"], [])
    assert "NameError: name 'nosuch' is not defined" in out
    assert "catch 1: NameError: " not in out


def _traced(log):
    log.append(sys.gettrace())
    return outer(log)


@pytest.mark.skipif(sys.version_info < (3, 12), reason="3.11 has no sys.monitoring: a trace function runs")
def test_no_trace_function_while_only_catch_is_armed_and_the_tool_is_freed():
    log: list = []
    debug_transcript(_traced, ["catch KeyError", "c"], log)
    assert log[0] is None  # the program ran without any trace function
    assert TOOL_NAME in [sys.monitoring.get_tool(tool) for tool in range(6)]
    CATCHES.remove()
    assert TOOL_NAME not in [sys.monitoring.get_tool(tool) for tool in range(6)]


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12+ uses sys.monitoring")
def test_on_311_a_trace_function_watches_calls_until_uncatch():
    log: list = []
    debug_transcript(_traced, ["catch KeyError", "c"], log)
    assert log[0] is not None and getattr(log[0], "__name__", "") == "call"
    CATCHES.remove()
    assert sys.gettrace() is None


def same_frame(log):
    items = [1, 2]
    try:
        items[5]
    except IndexError:
        log.append("handled")
    return log


def test_a_raise_in_the_frame_you_stopped_in_is_caught():
    out = debug_transcript(same_frame, ["catch IndexError", "c", "p items", "p log", "c"], [])
    assert "catch 1: IndexError: list index out of range  (raised here; no handler ran yet)" in out
    assert out.split("(llmpdb) ")[3].strip() == "[1, 2]" and out.split("(llmpdb) ")[4].strip() == "[]"


def test_same_frame_under_pdbs_own_tracing(tmp_path):
    """LLMPDB_FAST_BREAKPOINTS=0 (read when llmpdb is imported): pdb's trace function holds the frame."""
    script = tmp_path / "same.py"
    script.write_text("def main():\n    items = [1, 2]\n    breakpoint()\n    try:\n        items[5]\n"
                      "    except IndexError:\n        print('handled')\n\nmain()\n")
    env = {**os.environ, "PYTHONPATH": ROOT, "PYTHONBREAKPOINT": "llmpdb.set_trace", "NO_COLOR": "1",
           "LLMPDB_FAST_BREAKPOINTS": "0"}
    result = subprocess.run([sys.executable, str(script)], input="catch IndexError\nc\np items\nc\n", env=env,
                            capture_output=True, text=True, timeout=60)
    assert "catch 1: IndexError: list index out of range  (raised here; no handler ran yet)" in result.stdout
    assert result.stdout.index("[1, 2]") < result.stdout.index("handled")


def test_stepping_onto_a_raise_stops_there_once():
    out = debug_transcript(same_frame, ["catch IndexError", "n", "n", "n", "p log", "c"], [])
    assert out.count("IndexError: list index out of range") == 1  # the catch's line or pdb's own, not both
    assert out.split("(llmpdb) ")[5].strip() == "[]"


CATCH_THEN_BREAKPOINTS = """\
import json
breakpoint()
try:
    json.loads("{bad")
except ValueError as e:
    print("handled", type(e).__name__)
for i in range(2):
    breakpoint()
    print("step", i)
open(SIDE_EFFECT, "w").write("ran")
print("END")
"""


def _catch_session(tmp_path, commands: str) -> tuple[subprocess.CompletedProcess, bool]:
    script = tmp_path / "catch_then.py"
    marker = tmp_path / "SIDE_EFFECT"
    script.write_text(f"SIDE_EFFECT = {str(marker)!r}\n" + CATCH_THEN_BREAKPOINTS)
    env = {**os.environ, "PYTHONPATH": ROOT, "NO_COLOR": "1", "LLMPDB_HEADLESS": "log"}
    result = subprocess.run([sys.executable, "-m", "llmpdb", str(script)], input=commands, env=env,
                            capture_output=True, text=True, timeout=60)
    return result, marker.exists()


def test_breakpoints_after_a_catch_stop_still_stop(tmp_path):
    """3.11: the exceptions-only tracer had turned the frame's line events off; breakpoint() then ran through."""
    result, _ = _catch_session(tmp_path, "c\ncatch JSONDecodeError\nc\nc\np i\nc\np i\nc\n")
    out = result.stdout
    assert "(raised here; no handler ran yet)" in out
    assert out.count("catch_then.py(10)<module>()") == 2, out  # each later breakpoint() stopped
    assert out.index("handled JSONDecodeError") < out.index("step 0") < out.index("step 1")


def test_quit_at_a_catch_stop_ends_the_program(tmp_path):
    result, ran_on = _catch_session(tmp_path, "c\ncatch JSONDecodeError\nc\nq\n")
    assert "(raised here; no handler ran yet)" in result.stdout
    assert "llmpdb: quit" in result.stdout + result.stderr
    assert not ran_on and "END" not in result.stdout and "handled" not in result.stdout
