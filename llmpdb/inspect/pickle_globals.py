"""Which globals a pickle imports, and which of those torch's ``weights_only`` loading refuses: no unpickling.

Usage::

    imports = pickle_imports(BytesIO(data))     # ["torch._utils._rebuild_tensor_v2", "posix.system"]
    public = public_unsafe(fh)                  # torch's public scan of a torch.save zip, or None
    unsafe = unsafe_globals(imports, public)    # ["posix.system"], in the pickle's order
    shown_global("posix.system")                # "os.system"

``public_unsafe`` is ``torch.serialization.get_unsafe_globals_in_checkpoint``: it reads ``data.pkl`` of a
zip checkpoint (its size is checked by ``checkpoint_guard`` first) and knows only the opcodes ``torch.save``
writes. Where it cannot read a pickle (a legacy file, protocol 4), the allow list decides: torch keeps it
private (``torch._weights_only_unpickler``); without it, only the globals a ``torch.save`` of tensors needs
are allowed.
"""

from __future__ import annotations

import struct
from typing import Any, BinaryIO

__all__ = ["pickle_imports", "public_unsafe", "unsafe_globals", "shown_global"]

_STRING_OPS = {"STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE", "SHORT_BINUNICODE",
               "BINUNICODE8"}


def pickle_imports(stream: Any) -> list[str]:
    """Usage: ``pickle_imports(BytesIO(data))`` -> ``["torch._utils._rebuild_tensor_v2", "posix.system"]``.

    The globals one pickle imports (``GLOBAL``, ``INST``, ``STACK_GLOBAL`` resolved through a small model
    of the stack and memo; ``?`` where a name is built at load time), read with ``pickletools.genops``.
    """
    from _compat_pickle import IMPORT_MAPPING, NAME_MAPPING
    from pickletools import genops, markobject, stackslice

    found: list[str] = []
    stack: list[Any] = []
    memo: dict[Any, Any] = {}
    mark = object()
    for op, arg, _ in genops(stream):
        kind = op.name
        if kind in ("GLOBAL", "INST"):  # Python 2 names mapped as every unpickler does (__builtin__.set)
            module, _, attr = str(arg).partition(" ")
            module, attr = NAME_MAPPING.get((module, attr), (IMPORT_MAPPING.get(module, module), attr))
            found.append(f"{module}.{attr}")
        elif kind == "STACK_GLOBAL":
            attr = stack.pop() if stack else None
            module = stack.pop() if stack else None
            found.append(f"{module if isinstance(module, str) else '?'}.{attr if isinstance(attr, str) else '?'}")
            stack.append(None)
            continue
        elif kind.startswith("EXT"):
            found.append("copyreg.extension")
        if kind in ("PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE"):
            memo[len(memo) if kind == "MEMOIZE" else arg] = stack[-1] if stack else None
            continue
        if kind in ("GET", "BINGET", "LONG_BINGET"):
            stack.append(memo.get(arg))
            continue
        before = op.stack_before
        if markobject in before or stackslice in before:
            while stack and stack[-1] is not mark:
                stack.pop()
            if stack:
                stack.pop()
            below = before.index(markobject) if markobject in before else 0
        else:
            below = len(before)
        del stack[len(stack) - min(below, len(stack)):]
        for item in op.stack_after:
            stack.append(mark if item is markobject else arg if kind in _STRING_OPS else None)
    return found


def _allowed_globals() -> set[str]:
    """torch's ``weights_only`` allow list, for the pickles the public scan cannot read (legacy files, protocol
    4 opcodes): torch has no public accessor for it, so the private one where it exists, else the globals every
    ``torch.save`` of tensors imports."""
    try:
        from torch import _weights_only_unpickler as w
        return set(w._get_allowed_globals()) | set(w._get_user_allowed_globals())
    except (ImportError, AttributeError):
        return {"collections.OrderedDict", "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_parameter"}


def public_unsafe(fh: BinaryIO) -> set[str] | None:
    """``torch.serialization.get_unsafe_globals_in_checkpoint`` of a zip checkpoint (after its sizes were
    checked), read from the open file; None when this torch lacks it or cannot scan this pickle (it knows only
    the opcodes ``torch.save`` writes: a ``STACK_GLOBAL`` stops it)."""
    import pickle

    import torch.serialization as serialization

    scan = getattr(serialization, "get_unsafe_globals_in_checkpoint", None)
    if scan is None:
        return None
    fh.seek(0)
    try:
        return set(scan(fh))
    except (pickle.UnpicklingError, ValueError, RuntimeError, EOFError, OSError, struct.error):
        return None


def unsafe_globals(imports: list[str], public: set[str] | None) -> list[str]:
    """The imports outside the allow list, in the pickle's order. Where torch's public scan read the pickle it
    decides (it saw every global: any opcode it does not know stops it); elsewhere the allow list does."""
    found = list(dict.fromkeys(imports))
    if public is not None:
        return [g for g in found if g in public] + sorted(public - set(found))
    allowed = _allowed_globals()
    return [g for g in found if g not in allowed]


def shown_global(full: str) -> str:
    """``posix.system`` -> ``os.system``; ``builtins.print`` -> ``print``."""
    module, _, attr = full.rpartition(".")
    if module in ("posix", "nt"):
        return f"os.{attr}"
    return attr if module in ("builtins", "__builtin__") else full
