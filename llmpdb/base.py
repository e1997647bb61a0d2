"""Choose the debugger base class: pdb++ where it imports cleanly, else the standard library's ``pdb.Pdb``.

Usage: ``from llmpdb.base import BasePdb, BASE_NAME, stdlib_pdb``.

pdb++ may replace the ``pdb`` module on ``sys.path`` (``PDBPP_HIJACK_PDB``); its own copy of the standard
module is then ``pdbpp.pdb``. On CPython 3.13.0 pdb++ 0.12.1 fails at import time, and when it has hijacked
``pdb`` even ``import pdb`` fails: the standard module is then loaded from the standard library's file.
``LLMPDB_BASE=stdlib`` forces the standard base. With pdb++ the standard module is taken from
``pdbpp.pdb`` without ``import pdb``: the hijack would compile pdbpp.py and pdb.py from source once more.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types

__all__ = ["BasePdb", "BASE_NAME", "BASE_FALLBACK_REASON", "stdlib_pdb"]


def _stdlib_pdb_from_file() -> types.ModuleType:
    """Load the standard library's pdb.py by path, bypassing any ``pdb`` that shadows it."""
    import code  # a standard module that lives beside pdb.py

    path = os.path.join(os.path.dirname(code.__file__), "pdb.py")
    spec = importlib.util.spec_from_file_location("pdb", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load_stdlib_pdb() -> types.ModuleType:
    # pdb++ imported (``_load_base`` runs first): its copy is the module its Pdb is built on, and ``import
    # pdb`` would run pdb++'s hijack, compiling pdbpp.py and pdb.py from source once more
    inner = getattr(sys.modules.get("pdbpp"), "pdb", None)
    if isinstance(inner, types.ModuleType) and hasattr(inner, "Pdb"):
        return inner
    try:
        import pdb
    except Exception:  # a hijacking pdb++ that cannot import on this Python
        sys.modules.pop("pdb", None)
        module = _stdlib_pdb_from_file()
        sys.modules["pdb"] = module
        return module
    inner = getattr(pdb, "pdb", None)  # pdb++ keeps its own copy of the standard module here
    if isinstance(inner, types.ModuleType) and hasattr(inner, "Pdb"):
        return inner
    return pdb


def _load_base() -> tuple[type, str, str | None]:
    if os.environ.get("LLMPDB_BASE", "").lower() == "stdlib":
        return _load_stdlib_pdb().Pdb, "pdb", "LLMPDB_BASE=stdlib"
    try:
        import pdbpp

        base = pdbpp.Pdb
    except Exception as exc:  # ImportError, or pdb++ failing on this Python version
        return _load_stdlib_pdb().Pdb, "pdb", f"pdb++ unavailable: {type(exc).__name__}: {exc}"
    return base, "pdb++", None


BasePdb, BASE_NAME, BASE_FALLBACK_REASON = _load_base()
stdlib_pdb = _load_stdlib_pdb()
