"""Reading a frame's locals without undoing the user's edits at the prompt.

Usage::

    frame_locals(frame)                 # a dict of the frame's locals (the debugger's own dict at a stop)
    frame_self(frame)                   # the first positional argument (``self`` of a method), or None
    pin_locals(frame, pdb.curframe_locals); ...; unpin_locals()   # the debugger, around one stop

On Python 3.11 and 3.12, reading ``frame.f_locals`` copies the fast locals into the frame's dict again,
overwriting what ``!x = 99`` wrote there before pdb writes it back on continue. At a stop, the debugger
pins the dict it edits (``curframe_locals``) for its frame; ``frame_locals`` hands that dict out instead of
re-reading the frame, so no inspection ever loses an edit.
"""

from __future__ import annotations

__all__ = ["frame_locals", "frame_self", "pin_locals", "unpin_locals"]

_PINNED: dict[int, tuple[object, object]] = {}  # id(frame) -> (frame, the debugger's locals mapping)


def frame_locals(frame) -> dict:
    """Usage: ``frame_locals(frame)``; the frame's locals as a new dict ({} if they cannot be read)."""
    pinned = _PINNED.get(id(frame))
    try:
        if pinned is not None and pinned[0] is frame:
            return dict(pinned[1])
        return dict(frame.f_locals)
    except Exception:  # an odd frame (or a mapping that refuses iteration): no locals to show
        return {}


def frame_self(frame):
    """Usage: ``frame_self(frame)``; the frame's first positional argument, or None when it has none."""
    code = frame.f_code
    if not code.co_argcount:
        return None
    return frame_locals(frame).get(code.co_varnames[0])


def pin_locals(frame, mapping) -> None:
    """Usage: ``pin_locals(pdb.curframe, pdb.curframe_locals)``; ``frame_locals(frame)`` then reads ``mapping``."""
    if frame is not None and mapping is not None:
        _PINNED[id(frame)] = (frame, mapping)


def unpin_locals() -> None:
    """Usage: ``unpin_locals()`` at the end of a stop; frames are read afresh again."""
    _PINNED.clear()
