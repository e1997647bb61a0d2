"""Detect a stop inside ``torch.compile``d code, where graph-computed locals are missing from the frame.

Usage: ``compiled_context(frame)`` -> ``"a torch.compile resume function"``-style reason, or None.

Duck-typed: looks at code names and file paths on the stack only; never imports torch.
"""

from __future__ import annotations

import os

__all__ = ["compiled_context", "COMPILE_HINT"]

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
