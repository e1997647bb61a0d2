"""False breakpoint conditions answered in the engine, without a trip through pdb's ``trace_dispatch``.

Usage::

    from llmpdb.breakpoints.conditions import ConditionCache

    conditions = ConditionCache()
    if conditions.all_false(filename, line, frame):   # canonic filename, the frame at that line
        return None                                   # pdb would not have stopped: nothing to deliver

``all_false`` does what ``bdb.effective`` does for a line whose breakpoints all carry a condition and none
names a function: every enabled one counts a hit and has its condition evaluated in the frame (compiled
once per condition string, where pdb compiles it at each crossing). It answers True only when every
condition was false, and then the hits stay counted as pdb counts them. Anything else — an unconditional or
function breakpoint, a condition that is true, that raises or does not compile — undoes its hit counts and
answers False, and pdb decides as usual (evaluating the conditions itself: a condition with side effects
runs twice at the crossing where the program stops, never at the crossings where it goes on).
"""

from __future__ import annotations

import bdb

__all__ = ["ConditionCache"]


class ConditionCache:
    """Compiled breakpoint conditions and the check of one breakpoint line (``all_false``)."""

    def __init__(self):
        self.compiled: dict[str, object] = {}  # condition text -> code object (None: does not compile)

    def _code(self, cond: str):
        code = self.compiled.get(cond, False)
        if code is False:
            try:
                code = compile(cond, "<string>", "eval")
            except BaseException:  # None: bdb compiles it at the line and stops there (an error counts as true)
                code = None
            self.compiled[cond] = code
        return code

    def all_false(self, filename: str, line: int, frame) -> bool:
        """True when pdb would count the hits and stop at none of the breakpoints at ``filename:line``."""
        possibles = bdb.Breakpoint.bplist.get((filename, line))
        if not possibles:
            return False
        if len(possibles) == 1:  # the usual line: one breakpoint; the same answer as the loops below give
            bp = possibles[0]
            if bp.funcname:
                return False
            if not bp.enabled:
                return True
            code = self.compiled.get(bp.cond, False) if bp.cond else None
            if code is False:
                code = self._code(bp.cond)
            if code is None:
                return False
            bp.hits += 1
            try:
                if not eval(code, frame.f_globals, frame.f_locals):
                    return True
            except BaseException:  # bdb evaluates it again and stops there (an error counts as true)
                pass
            bp.hits -= 1
            return False
        counted = []
        answer = True
        for bp in possibles:
            if bp.funcname or (bp.enabled and not bp.cond):
                answer = False
                break
        if answer:
            f_globals = frame.f_globals
            f_locals = None
            compiled = self.compiled
            for bp in possibles:
                if not bp.enabled:
                    continue
                code = compiled.get(bp.cond, False)  # the cache's hit without a call: once per crossing
                if code is False:
                    code = self._code(bp.cond)
                if code is None:
                    answer = False
                    break
                bp.hits += 1
                counted.append(bp)
                if f_locals is None:
                    f_locals = frame.f_locals
                try:
                    value = eval(code, f_globals, f_locals)
                    if value:
                        answer = False
                        break
                except BaseException:  # bdb evaluates it again and stops there (an error counts as true)
                    answer = False
                    break
        if not answer:
            for bp in counted:
                bp.hits -= 1
        return answer
