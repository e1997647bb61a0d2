"""Colour decisions and ANSI styling.

Usage: ``style = Style.for_stream(sys.stdout)``; ``style.header("path")``. Plain text under ``NO_COLOR``,
``TERM=dumb`` or without a TTY; ``LLMPDB_COLOR=1`` forces colour (tests, pagers that understand ANSI).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

__all__ = ["Style", "color_enabled", "strip_ansi", "visible_len"]

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def strip_ansi(text: str) -> str:
    """Usage: ``strip_ansi("\\x1b[1mx\\x1b[0m")`` -> ``"x"``."""
    return _ANSI.sub("", text)


def visible_len(text: str) -> int:
    """Usage: ``visible_len(styled)``; the width of ``text`` on screen, ANSI codes not counted."""
    return len(strip_ansi(text))


def color_enabled(stream) -> bool:
    """Usage: ``color_enabled(sys.stdout)``; True only for a colour-capable terminal."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("LLMPDB_COLOR") == "1":
        return True
    if os.environ.get("TERM", "") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (ValueError, OSError):
        return False


@dataclass(frozen=True)
class Style:
    """ANSI styles that collapse to identity when ``color`` is False."""

    color: bool = False

    @classmethod
    def for_stream(cls, stream) -> "Style":
        return cls(color_enabled(stream))

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color and text else text

    def header(self, text: str) -> str:
        return self._wrap("1", text)

    def dim(self, text: str) -> str:
        return self._wrap("2", text)

    def path(self, text: str) -> str:
        return self._wrap("36", text)

    def warn(self, text: str) -> str:
        return self._wrap("33", text)

    def bad(self, text: str) -> str:
        return self._wrap("31;1", text)
