"""Detect a stop inside ``torch.compile``d code, where graph-computed locals are missing from the frame.

Usage::

    compiled_context(frame)   # "a torch.compile resume function ..."-style reason, or None
    compiled_note(frame)      # the one warning line llmpdb prints for it, or None

Duck-typed: looks at code names and file paths on the stack only; never imports torch.
"""

from __future__ import annotations

import os

import sys

__all__ = ["compiled_context", "compiled_note", "COMPILE_HINT"]

COMPILE_HINT = ("locals computed inside the compiled graph are missing from this frame; "
                "rerun with TORCHDYNAMO_DISABLE=1 (or `python -m llmpdb --no-compile`) to see them all")

_DYNAMO_DIR = os.sep + os.path.join("torch", "_dynamo") + os.sep
_RESUME_PREFIX = "torch_dynamo_resume_in_"


def compiled_context(frame, max_depth: int = 200) -> str | None:
    """Return why ``frame`` looks like compiled code (a resume function, dynamo on the stack), or None."""
    if frame is None:
        return None
    if frame.f_code.co_name.startswith(_RESUME_PREFIX):
        return f"a torch.compile resume function ({frame.f_code.co_name}) after a graph break"
    current, depth = frame.f_back, 0
    while current is not None and depth < max_depth:
        code = current.f_code
        if code.co_name.startswith(_RESUME_PREFIX):
            return "code called from a torch.compile resume function"
        if _DYNAMO_DIR in code.co_filename and code.co_filename.endswith("eval_frame.py"):
            return "code run through torch.compile (torch._dynamo is on the stack)"
        current, depth = current.f_back, depth + 1
    return None


def _being_traced() -> str | None:
    """``torch.compiler.is_compiling()`` where torch is loaded: a frame dynamo is tracing right now."""
    compiler = getattr(sys.modules.get("torch"), "compiler", None)
    is_compiling = getattr(compiler, "is_compiling", None)
    try:
        return "code being traced by torch.compile" if callable(is_compiling) and is_compiling() else None
    except Exception as exc:  # an old or broken torch: say we could not tell
        return f"code that may be compiled (could not tell: {type(exc).__name__}: {exc})"


def compiled_note(frame) -> str | None:
    """Usage: ``compiled_note(frame)`` -> ``"llmpdb: stopped in ...: locals computed inside ..."`` or None."""
    reason = compiled_context(frame) or _being_traced()
    return f"llmpdb: stopped in {reason}: {COMPILE_HINT}" if reason else None
