"""Which frames are the debugger's own (llmpdb's, bdb's, pdb's, pdb++'s), and the stack and tracebacks without them.

Usage::

    from llmpdb.inspect.debugger_frames import is_debugger_frame, program_traceback, visible_stack
    is_debugger_frame(frame)                       # True for llmpdb/bdb/pdb frames and the string bdb runs
    program_traceback(exc.__traceback__)           # the traceback a user wrote (its last entry always kept)
    stack, index = visible_stack(stack, index)     # pdb's stack without llmpdb and bdb's launcher

llmpdb's own code is decided by the package's real location (never by a folder name in the path), so a
user's checkout in a folder named ``llmpdb/`` is the user's code. Pure: reads code objects and file names.
"""

from __future__ import annotations

import bdb
import os
import types

__all__ = ["is_debugger_frame", "program_traceback", "visible_stack", "is_llmpdb_frame", "PACKAGE_DIR"]

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # .../llmpdb/
_BDB_FILE = bdb.__file__
_RUN_NAMES = frozenset({"run", "runeval", "runctx", "runcall"})
_STDLIB_DIR = os.path.dirname(os.path.abspath(bdb.__file__))
_DEBUGGER_FILES = frozenset(os.path.join(_STDLIB_DIR, name) for name in ("bdb.py", "pdb.py", "cmd.py"))
_VERDICTS: dict[str, bool] = {}  # file name -> a debugger file (llmpdb, bdb, pdb, pdb++)


def _debugger_file(filename: str) -> bool:
    verdict = _VERDICTS.get(filename)
    if verdict is None:
        base = os.path.basename(filename)
        verdict = (filename.startswith(PACKAGE_DIR) or filename in _DEBUGGER_FILES
                   or base == "pdbpp.py" or f"{os.sep}_pdbpp_path_hack{os.sep}" in filename)
        _VERDICTS[filename] = verdict
    return verdict


def is_debugger_frame(frame) -> bool:
    """Usage: ``is_debugger_frame(frame)``; llmpdb's, bdb's, pdb's frames and the string bdb runs."""
    filename = frame.f_code.co_filename
    if filename == "<string>":
        caller = frame.f_back
        return caller is not None and caller.f_code.co_filename == _BDB_FILE
    return _debugger_file(filename)


def program_traceback(tb):
    """Usage: ``traceback.print_exception(type(e), e, program_traceback(e.__traceback__))``; the traceback
    without llmpdb's, bdb's and pdb's entries (the launcher a user never wrote); its last entry always stays."""
    entries = []
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    kept = [t for t in entries[:-1] if not is_debugger_frame(t.tb_frame)] + entries[-1:]
    chain = None
    for entry in reversed(kept):
        chain = types.TracebackType(chain, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return chain


def is_llmpdb_frame(frame) -> bool:
    return frame.f_code.co_filename.startswith(PACKAGE_DIR)


def visible_stack(stack: list, index: int) -> tuple[list, int]:
    """Usage: ``stack, index = visible_stack(stack, index)``; drop llmpdb's frames and what is above bdb's
    ``run`` (the launcher). The frame at ``index`` always stays."""
    if not stack:
        return stack, index
    start = 0
    for i, (frame, _) in enumerate(stack[: index + 1]):
        code = frame.f_code
        if code.co_name in _RUN_NAMES and code.co_filename == _BDB_FILE:
            start = i
    kept = [i for i in range(start, len(stack)) if i == index or not is_llmpdb_frame(stack[i][0])]
    return [stack[i] for i in kept], kept.index(index) if index in kept else len(kept) - 1
