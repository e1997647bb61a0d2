"""The monitoring engine's note about ``torch.compile`` (Python 3.12+): breakpoints in code that dynamo traces.

Usage: a base of ``MonitoringEngine`` (``breakpoints/monitoring.py``); nothing to call by hand.

dynamo never runs a compiled function's own code: it runs its own translation of it, so a breakpoint line
inside cannot stop (stdlib pdb does not stop there either). The engine says so once per code object, as the
hook engine does on 3.11 (``hooked_dynamo``). dynamo builds a translator for each code object it traces:
the compiled function and every function it inlines, such as a submodule's ``forward`` when a whole model
is compiled. The engine's global ``PY_START`` stays on for the translator's constructor (every other code
object answers ``DISABLE`` at its first start). At that event the engine reads the constructor's ``f_code``
argument (a code object, checked by type) and remembers it.
A breakpoint line inside a remembered code tree gets the note: at once when dynamo traces that code, or at
the next ``continue`` when the breakpoint is set after the compile.

Code compiled before the engine was armed (a model compiled and warmed up, then a breakpoint set at a stop)
is found when breakpoints change through torch's own record (``compiled_codes``): the code objects dynamo
was asked to convert (``convert_frame.input_codes``) that hold compiled entries. That record names the
compiled functions only, not what they inlined: a breakpoint in a submodule's ``forward`` of a model
compiled before the engine was armed gets no note (nor does it on 3.11). A torch without these names, or
whose translator takes no ``f_code``, gets no note, as before.
"""

from __future__ import annotations

import sys
import types

from .engine import code_breakpoint_lines, identity
from .hooked_dynamo import COMPILED_NOTE
from .patching import code_tree

__all__ = ["DynamoNote", "is_translator_init", "compiled_codes"]

_TRANSLATOR_FILES = ("/torch/_dynamo/symbolic_convert.py", "\\torch\\_dynamo\\symbolic_convert.py")


def is_translator_init(code: types.CodeType) -> bool:
    """Usage: ``is_translator_init(code)`` -> whether ``code`` is the constructor of a dynamo translator that
    takes the traced code as its ``f_code`` argument."""
    return (code.co_name == "__init__" and code.co_filename.endswith(_TRANSLATOR_FILES)
            and "f_code" in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])


def compiled_codes() -> list[types.CodeType]:
    """Usage: ``compiled_codes()`` -> the code objects torch.compile has compiled so far in this process
    (dynamo's ``input_codes`` that hold cache entries); [] when torch's names are not there. Reads module
    dictionaries only, imports nothing."""
    convert = sys.modules.get("torch._dynamo.convert_frame")
    eval_frame = sys.modules.get("torch._C._dynamo.eval_frame")
    if convert is None or eval_frame is None:
        return []
    try:
        tracker = vars(convert).get("input_codes")
        entries_of = vars(eval_frame).get("_debug_get_cache_entry_list")
        seen = vars(tracker).get("seen") if tracker is not None and hasattr(tracker, "__dict__") else None
        if type(seen) is not list or entries_of is None:
            return []
        codes = []
        for ref in list(seen):
            code = ref() if callable(ref) else None
            if type(code) is types.CodeType and entries_of(code):
                codes.append(code)
        return codes
    except Exception:  # noqa: BLE001  another torch: no note, as before
        return []


class DynamoNote:
    """The ``torch.compile`` part of ``MonitoringEngine``; its state is ``dynamo_traced`` (identity -> code
    dynamo traced) and ``dynamo_said`` (notes already given), both kept for the process."""

    dynamo_traced: dict
    dynamo_said: set

    def _dynamo_init(self) -> None:
        self.dynamo_traced = {}
        self.dynamo_said = set()

    def _dynamo_traces(self, frame) -> None:
        """A translator's constructor starts in ``frame``: remember the code it traces, and say now if that
        code holds a breakpoint line. Never raises: this runs inside the program's ``torch.compile``."""
        try:
            traced = frame.f_locals.get("f_code")
            if type(traced) is not types.CodeType or identity(traced) in self.dynamo_traced:
                return
            self.dynamo_traced[identity(traced)] = traced
            self._dynamo_say(traced, now=not self.state["depth"])
        except Exception as exc:  # noqa: BLE001  the compile goes on; the problem is said at the next stop
            self.problems.append(f"reading what torch.compile traces failed: {type(exc).__name__}: {exc}")

    def _dynamo_recheck(self) -> None:
        """Breakpoints changed: say the note (at the next ``continue``) for code dynamo traced or compiled
        before that now holds a breakpoint line."""
        for code in [*self.dynamo_traced.values(), *compiled_codes()]:
            if self.breaks.get(self.pdb.canonic(code.co_filename)):
                self._dynamo_say(code, now=False)

    def _dynamo_say(self, code: types.CodeType, now: bool) -> None:
        file_lines = self.breaks.get(self.pdb.canonic(code.co_filename))
        if not file_lines or not any(code_breakpoint_lines(c, file_lines) for c in code_tree(code)):
            return
        note = f"{code.co_name} ({code.co_filename}:{code.co_firstlineno}) runs under torch.compile; {COMPILED_NOTE}"
        if note in self.dynamo_said:
            return
        self.dynamo_said.add(note)
        if not now:
            self.problems.append(note)
            return
        try:
            self.pdb.message(f"*** llmpdb fast breakpoints: {note}")
        except Exception:  # noqa: BLE001  a closed or broken output: the note is a nicety
            pass
