"""The script under ``python -m llmpdb`` on Python 3.11: compiled with a guarded hook on every line.

Usage::

    code = compile_guarded(source_bytes, "/abs/script.py")   # module code; every nested function too
    arm_guards(breaks, canonic)                               # {canonic file: lines} -> fill the flags
    is_guarded(code)                                          # its guards report its breakpoint lines
    covers(canonic_filename, canonic)                         # every code object of the file is guarded
    debugger._run(GuardedScript(pdb_script_target))          # what ``FastBreakpointsMixin._run`` does

A 3.11 breakpoint in a frame that is already running cannot get hooks (a frame's code cannot change), so
it used to need a trace function for the rest of the frame: the script's module code, and its ``main()``,
are exactly such frames. The script is llmpdb's to compile, so it is compiled with a hook at every place a
line event can fire (``bytecode.instrument`` with ``guards``), each behind a test of a per-line list that
is empty until a breakpoint arms that line. A breakpoint set later in the running script then costs what a
breakpoint elsewhere costs; an unarmed line costs two instructions (``LOAD_CONST``,
``POP_JUMP_FORWARD_IF_FALSE``). The lists are shared by every code object of a file (a comprehension and
its line share one); pdb still decides at every hooked line. A script that mentions ``torch.compile``,
``torch.export`` or dynamo is not guarded (dynamo reads the bytecode of what it compiles and refuses a hook
constant): it runs as before, breakpoints in its running frames traced.
"""

from __future__ import annotations

import io
import re
import sys
import types
from typing import Callable

from .bytecode import GuardFlag, instrument
from .engine import identity
from .patching import fast_breakpoint_hook

__all__ = ["compile_guarded", "arm_guards", "is_guarded", "covers", "reads_bytecode", "GuardedScript", "GUARDED"]

GUARDED: dict[int, types.CodeType] = {}
"""identity(code) -> code, for every code object compiled with guards."""

_FLAGS: dict[str, dict[int, GuardFlag]] = {}  # raw filename -> line -> flag (non-empty: armed)
_FIRST: dict[str, dict[int, set[int]]] = {}  # raw filename -> co_firstlineno -> lines of those code objects
_COMPLETE: dict[str, bool] = {}  # raw filename -> every code object of it got guards


def _all_lines(code: types.CodeType) -> frozenset[int]:
    return frozenset(line for _, _, line in code.co_lines() if line is not None)


def _guard_tree(code: types.CodeType, flags: dict[int, GuardFlag], first: dict[int, set[int]]) -> tuple:
    """``code`` with guards in it and every nested code object; (new code, whether all of them got guards)."""
    complete = True
    consts = list(code.co_consts)
    for i, const in enumerate(consts):
        if isinstance(const, types.CodeType):
            consts[i], nested_complete = _guard_tree(const, flags, first)
            complete = complete and nested_complete
    base = code.replace(co_consts=tuple(consts))
    lines = _all_lines(code)
    first.setdefault(code.co_firstlineno, set()).update(lines)
    guards = {line: flags.setdefault(line, GuardFlag()) for line in lines}
    try:
        new = instrument(base, lines, fast_breakpoint_hook, guards=guards) if lines else base
    except Exception:  # an assembler limit: this code object stays as compiled (the engine traces it)
        new = None
    if new is None:
        return base, False
    GUARDED[identity(new)] = new
    return new, complete


def compile_guarded(source: bytes | str, filename: str) -> types.CodeType:
    """Usage: ``compile_guarded(open(path, "rb").read(), path)``; the module code, guarded where possible
    (``compile``'s own errors, e.g. ``SyntaxError``, propagate as from ``compile``)."""
    code = compile(source, filename, "exec", dont_inherit=True)
    flags = _FLAGS.setdefault(filename, {})
    first = _FIRST.setdefault(filename, {})
    guarded, complete = _guard_tree(code, flags, first)
    _COMPLETE[filename] = _COMPLETE.get(filename, True) and complete
    return guarded


def is_guarded(code: types.CodeType) -> bool:
    """Whether ``code`` was compiled with guards (its breakpoint lines are armed through its flags)."""
    return GUARDED.get(identity(code)) is code


def arm_guards(breaks: dict[str, frozenset[int]], canonic: Callable[[str], str]) -> None:
    """Fill the flag of every breakpoint line of a guarded file, empty every other flag. ``b function``
    (a breakpoint on a code object's first line) arms every line of that code object: pdb takes the first
    line it sees in a frame of the function, which is not the first line in a frame already running."""
    for filename, flags in _FLAGS.items():
        lines = breaks.get(canonic(filename), frozenset())
        armed = set(lines)
        for firstlineno, starts in _FIRST.get(filename, {}).items():
            if firstlineno in lines:
                armed |= starts
        for line, flag in flags.items():
            if line in armed:
                if not flag:
                    flag.append(True)
            elif flag:
                flag.clear()


def covers(filename: str, canonic: Callable[[str], str]) -> bool:
    """Whether all code of the (canonic) ``filename`` in this process is guarded: it was compiled only by
    ``compile_guarded``, completely, and no module other than ``__main__`` was imported from that file."""
    raw = [name for name in _COMPLETE if canonic(name) == filename]
    if not raw or not all(_COMPLETE[name] for name in raw):
        return False
    for name, module in list(sys.modules.items()):
        if name == "__main__":
            continue
        module_file = _module_file(module)
        if module_file is not None and canonic(module_file) == filename:
            return False
    return True


def _module_file(module) -> str | None:
    """A module's ``__file__`` read from its ``__dict__`` (never through a module ``__getattr__``)."""
    if types.ModuleType not in type(module).__mro__:
        return None
    namespace = object.__getattribute__(module, "__dict__")
    value = namespace.get("__file__") if type(namespace) is dict else None
    return value if type(value) is str else None


_COMPILERS = re.compile(r"\btorch\s*\.\s*(compile|export|_dynamo)\b|\bdynamo\b|\bimport\s+[^\n]*\b(compile|export)\b"
                        r"|\.compile\((?!\s*[rbuf]*['\"])|\btorch_compile\b|\bcompile\s*=\s*True\b")


def reads_bytecode(source: bytes | str) -> bool:
    """Whether the script may hand its functions to ``torch.compile``/``torch.export`` (dynamo reads their
    bytecode and fails on a hook constant): then it is not guarded. Errs towards True (``re.compile(p)``)."""
    text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
    return _COMPILERS.search(text) is not None


class GuardedScript(str):
    """pdb's script target (``pdb._ScriptTarget``) whose ``code`` runs the guarded module code through a
    one-line ``<string>`` module, as pdb's own ``exec(compile(...))`` does (same frames, same stack)."""

    def __new__(cls, target):
        result = super().__new__(cls, target)
        result.target = target
        return result

    @property
    def filename(self):
        return self.target.filename

    @property
    def namespace(self):
        return self.target.namespace

    @property
    def code(self):
        with io.open_code(str(self.target)) as handle:
            source = handle.read()
        if reads_bytecode(source):
            return self.target.code
        try:
            module = compile_guarded(source, str(self.target))
        except (SyntaxError, ValueError):
            return self.target.code  # pdb's own code raises it while running, as without llmpdb
        runner = compile("exec('<llmpdb script>')", "<string>", "exec")
        consts = tuple(module if const == "<llmpdb script>" else const for const in runner.co_consts)
        return runner.replace(co_consts=consts)
