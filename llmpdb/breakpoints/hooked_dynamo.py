"""The hook engine's hand-off to ``torch.compile`` (Python 3.11): code dynamo compiles stays unhooked.

Usage: a base of ``HookEngine`` (``breakpoints/hooked.py``); nothing to call by hand.

dynamo refuses code objects that carry llmpdb's hooks in their constants (the program would die in
``Cannot construct ConstantVariable``). So a function of a breakpoint file that a ``torch.compile`` wrapper
compiles is never hooked (``_find_dynamo_code``), and when dynamo reads hooked code while the program runs it
is handed the original (``patching``) and told here (``gave_dynamo``): that code and its nested code stay
unhooked for good, the lean trace engine covers their breakpoints, and a note says once that a breakpoint
cannot stop inside compiled code.
"""

from __future__ import annotations

import sys
import types

from .engine import code_breakpoint_lines, identity
from .patching import code_tree, dynamo_wrapped_code, is_dynamo_file

__all__ = ["DynamoHandOff", "COMPILED_NOTE"]

COMPILED_NOTE = "a breakpoint cannot stop inside compiled code"


class DynamoHandOff:
    """The ``torch.compile`` part of ``HookEngine``: its state (``dynamo_codes``, ``dynamo_read``,
    ``tried_late``, ``hook_breaks``, ``said``, ``problems``) is ``HookEngine``'s."""

    def _find_dynamo_code(self, objects: list, breaks: dict[str, frozenset[int]]) -> None:
        """Code trees of breakpoint files that ``torch.compile`` wrappers compile: they stay unhooked."""
        for obj in objects:
            if type(obj) is not types.FunctionType or not is_dynamo_file(obj.__code__.co_filename):
                continue
            wrapped = dynamo_wrapped_code(obj)
            if wrapped is None or self.pdb.canonic(wrapped.co_filename) not in breaks:
                continue
            for code in code_tree(wrapped):
                self.dynamo_codes[identity(code)] = code
                self.tried_late[identity(code)] = code
            self._say_dynamo(wrapped)

    def _say_dynamo(self, code: types.CodeType, now: bool = False) -> None:
        """Note once per code object that its breakpoints cannot stop in what torch.compile compiles: at
        the next plan, or ``now`` (dynamo read it while the program runs: there may be no next stop)."""
        if not self._tree_has_lines_unhooked(code):
            return
        note = (f"{code.co_name} ({code.co_filename}:{code.co_firstlineno}) runs under torch.compile: "
                f"traced instead of hooked; {COMPILED_NOTE}")
        self.problems_seen = True
        if note not in self.said:
            self.said.add(note)
            if not now:
                self.problems.append(note)
                return
            try:
                self.pdb.message(f"*** llmpdb fast breakpoints: {note}")
            except Exception:  # a closed or broken output: the note is a nicety
                pass

    def gave_dynamo(self, code: types.CodeType) -> None:
        """``torch._dynamo`` was handed ``code`` (the original of hooked code, ``patching._code_read``):
        it and its nested code stay unhooked for good; the trace engine covers their breakpoints."""
        for nested in code_tree(code):
            self.dynamo_read[identity(nested)] = nested
            self.dynamo_codes[identity(nested)] = nested
            self.tried_late[identity(nested)] = nested
        self._say_dynamo(code, now=True)
        if self.armed and sys.gettrace() != self._global:
            self.refresh()

    def _tree_has_lines_unhooked(self, code: types.CodeType) -> bool:
        file_lines = self.hook_breaks.get(self.pdb.canonic(code.co_filename))
        return bool(file_lines) and any(code_breakpoint_lines(c, file_lines) for c in code_tree(code))
