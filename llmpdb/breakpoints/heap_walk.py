"""The 3.11 engine's one pass over the heap: the functions and suspended generators of breakpoint files.

Usage::

    found, wrappers = breakpoint_code_on_heap(scan, canonic, dynamo=dynamo_loaded())
    # found: [(function or generator, its code)] whose code comes from a file of ``scan``
    # wrappers: functions of torch._dynamo (their wrapped code must stay unhooked)

A function's ``__code__`` is audited on 3.11 (one audit-hook call each, ~1 µs with llmpdb's hook), its
``__globals__`` is not: a function whose module (``__globals__["__file__"]``) holds no breakpoint and is not
dynamo's is skipped without reading its code. Functions whose globals name no file are read as before.
With torch and transformers loaded (~376k objects, 75k functions) the pass takes ~0.1 s where reading
every ``__code__`` took 0.24–0.29 s.
"""

from __future__ import annotations

import gc
import types
from typing import Callable

from .patching import is_dynamo_file

__all__ = ["breakpoint_code_on_heap", "SCANNED_TYPES"]

SCANNED_TYPES = frozenset({types.FunctionType, types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType})
_dict_get = dict.get  # never a subclass's ``get``: the debuggee's code does not run
_FUNCTION = types.FunctionType


def breakpoint_code_on_heap(scan: dict, canonic: Callable[[str], str], dynamo: bool) -> tuple[list, list]:
    """(found, wrappers): see the module docstring; ``scan`` maps canonic filenames to their lines."""
    kind_of: dict[str, int] = {}  # raw filename -> 1: holds breakpoints, 2: torch._dynamo, 0: neither

    def kind_of_file(raw: str) -> int:
        kind = kind_of.get(raw)
        if kind is None:
            kind = 1 if canonic(raw) in scan else 2 if dynamo and is_dynamo_file(raw) else 0
            kind_of[raw] = kind
        return kind

    found, wrappers = [], []
    for obj in [o for o in gc.get_objects() if type(o) in SCANNED_TYPES]:
        kind = type(obj)
        if kind is _FUNCTION:
            home = _dict_get(obj.__globals__, "__file__")
            if type(home) is str and kind_of_file(home) == 0:
                continue
            code = obj.__code__
        else:
            code = obj.gi_code if kind is types.GeneratorType else (
                obj.cr_code if kind is types.CoroutineType else obj.ag_code)
        file_kind = kind_of_file(code.co_filename)
        if file_kind == 1:
            found.append((obj, code))
        elif file_kind == 2 and kind is _FUNCTION:
            wrappers.append(obj)
    return found, wrappers
