"""The monitoring engine (3.12+) says once that a breakpoint line in code ``torch.compile`` traces cannot stop.

Torch-free, so it runs in the 3.12/3.13 core suites: the translator here is a class defined in a file at
``torch/_dynamo/symbolic_convert.py`` under a temporary directory, built as dynamo builds one per traced code
object (``f_code``). The same note with a real ``torch.compile`` is checked by ``test_compile.py`` and
``test_compiled_model.py`` where torch is installed.
"""

from __future__ import annotations

import sys

import pytest

from breakpoint_sessions import FastPdb, StockPdb, load, run_session, stops
from breakpoint_sessions import fresh_breakpoints  # noqa: F401  (fixture)

pytestmark = pytest.mark.skipif(sys.version_info < (3, 12), reason="the sys.monitoring engine is 3.12+")

NOTE = "*** llmpdb fast breakpoints: body ("
CANNOT_STOP = "runs under torch.compile; a breakpoint cannot stop inside compiled code"

TRANSLATOR = '''\
class InstructionTranslatorBase:
    def __init__(self, f_code, inline_depth=0):
        self.f_code = f_code


class NoCode:
    def __init__(self, f_code=None):
        self.f_code = f_code
'''

TARGET = '''\
def body(x):
    a = x + 1  # L:body
    return a * 3


def untouched(x):
    return x - 1  # L:untouched


def driver(translator):
    translator.InstructionTranslatorBase(body.__code__)  # L:first
    translator.InstructionTranslatorBase(body.__code__, inline_depth=1)
    translator.NoCode(f_code="not a code object")
    translator.InstructionTranslatorBase(untouched.__code__)
    return untouched(5)  # L:last
'''


def _translator(tmp_path):
    folder = tmp_path / "torch" / "_dynamo"
    folder.mkdir(parents=True)
    return load(folder, "symbolic_convert", TRANSLATOR)


def test_a_breakpoint_in_traced_code_is_said_once_and_the_rest_is_as_under_pdb(tmp_path):
    translator = _translator(tmp_path)
    target = load(tmp_path, "dynamo_target", TARGET)
    body, last = target.LINES["body"], target.LINES["last"]
    commands = [f"b {target.__file__}:{body}", f"b {target.__file__}:{last}", "c", "c"]
    _, stock, stock_result = run_session(StockPdb, target.driver, commands, translator)
    _, fast, result = run_session(FastPdb, target.driver, commands, translator)
    notes = [line for line in fast.splitlines() if line.startswith(NOTE)]
    assert notes == [f"{NOTE}{target.__file__}:1) {CANNOT_STOP}"]
    assert "\n".join(line for line in fast.splitlines() if not line.startswith(NOTE)) == stock.rstrip("\n")
    assert result == stock_result == 4
    assert stops(fast)[1] == f"driver:{last}"  # ``untouched`` was traced too, but holds no breakpoint line


def test_code_traced_before_its_breakpoint_was_set_is_said_at_the_next_continue(tmp_path):
    translator = _translator(tmp_path)
    target = load(tmp_path, "dynamo_late", TARGET)
    first, body = target.LINES["first"], target.LINES["body"]
    path = target.__file__
    commands = [f"b {path}:{first + 2}", "c", f"b {path}:{body}", "c"]
    _, text, result = run_session(FastPdb, target.driver, commands, translator)
    assert result == 4
    assert text.splitlines() == [
        f"> {path}({first})driver()", "-> translator.InstructionTranslatorBase(body.__code__)  # L:first", "(Pdb)",
        f"Breakpoint 1 at {path}:{first + 2}", "(Pdb)",
        f"> {path}({first + 2})driver()", '-> translator.NoCode(f_code="not a code object")', "(Pdb)",
        f"Breakpoint 2 at {path}:{body}", "(Pdb)",
        f"{NOTE}{path}:1) {CANNOT_STOP}",  # said as the program goes on: body was traced at line {first}
    ]
