"""Taking a ``sys.monitoring`` tool id (Python 3.12+): the first free one of a preference list.

Usage::

    tool = take_tool_id((4, 3), "llmpdb-births")    # the id now held under that name, or None
    sys.monitoring.set_local_events(tool, code, sys.monitoring.events.PY_RETURN)   # use it
    sys.monitoring.free_tool_id(tool)

Four parts of llmpdb hold an id while they work, each preferring a different one so they rarely compete:
the line engine (``DEBUGGER_ID`` 0, then 3, 4), the wait for a forward (3, 4, 0), exception breakpoints
(5, 4, 3) and, while a module breakpoint is pending, the births watch (4, 3). 1 and 2 are left to
coverage tools and profilers.
"""

from __future__ import annotations

import sys

__all__ = ["take_tool_id"]

_MON = getattr(sys, "monitoring", None)


def take_tool_id(preferred, name: str) -> int | None:
    """Usage: ``take_tool_id((3, 4), "llmpdb")``; the first free id of ``preferred``, now used as
    ``name``; None where none is free (or before 3.12)."""
    if _MON is None:
        return None
    for tool in preferred:
        if _MON.get_tool(tool) is None:
            _MON.use_tool_id(tool, name)
            return tool
    return None
