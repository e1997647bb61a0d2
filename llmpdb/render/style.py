"""Colour decisions and ANSI styling.

Usage: ``style = Style.for_stream(sys.stdout)``; ``style.header("path")``; ``Style(True, palette={"dtype":
"green"})``. Plain text under ``NO_COLOR``, ``TERM=dumb`` or without a TTY; ``LLMPDB_COLOR=1`` forces colour
(tests, pagers that understand ANSI). Each role (``ROLES``: header, dim, path, warn, bad, error, dtype,
device, flag) has a default colour; ``palette`` maps roles to colour names (``color_code("bold red")``).
"""

from __future__ import annotations

import os
import re

__all__ = ["Style", "ROLES", "color_code", "color_enabled", "strip_ansi", "visible_len"]

_ANSI = re.compile(r"\x1b\[[0-9;]*m")

# role -> default SGR code
ROLES: dict[str, str] = {"header": "1", "dim": "2", "path": "36", "warn": "33", "bad": "31;1", "error": "31",
                         "dtype": "32", "device": "35", "flag": "33"}
_COLORS = {"black": 0, "red": 1, "green": 2, "yellow": 3, "blue": 4, "magenta": 5, "cyan": 6, "white": 7}
_ATTRS = {"bold": "1", "dim": "2", "italic": "3", "underline": "4", "reverse": "7"}


def color_code(name: str) -> str | None:
    """Usage: ``color_code("bold bright_red")`` -> ``"1;91"``; ``None`` for a name that is not a colour.

    Words: ``black red green yellow blue magenta cyan white`` (``bright_`` prefix for the bright ones),
    ``bold dim italic underline reverse``, ``default`` (no colour); joined by spaces."""
    words = str(name).lower().replace("-", "_").split()
    if not words:
        return None
    codes = []
    for word in words:
        if word in _ATTRS:
            codes.append(_ATTRS[word])
        elif word in _COLORS:
            codes.append(str(30 + _COLORS[word]))
        elif word.startswith("bright_") and word[7:] in _COLORS:
            codes.append(str(90 + _COLORS[word[7:]]))
        elif word not in ("default", "none", "plain"):
            return None
    return ";".join(codes)


def strip_ansi(text: str) -> str:
    """Usage: ``strip_ansi("\\x1b[1mx\\x1b[0m")`` -> ``"x"``."""
    return _ANSI.sub("", text)


def visible_len(text: str) -> int:
    """Usage: ``visible_len(styled)``; the width of ``text`` on screen in display cells, ANSI codes not
    counted, as the terminal draws it (``wcwidth``, which prompt_toolkit installs): East Asian wide/fullwidth
    characters (``注意力``) take 2 cells, combining marks, zero-width spaces and joiners 0, an emoji with a
    skin-tone modifier or a ZWJ sequence (``👩‍👩‍👧``) 2."""
    plain = strip_ansi(text)
    if plain.isascii() or _narrow(plain):  # what llmpdb itself prints: no wcwidth import on the way to a stop
        return len(plain)
    try:
        from wcwidth import wcswidth
    except ImportError:  # prompt_toolkit brings it; without it, Unicode's own tables
        wcswidth = None
    width = wcswidth(plain) if wcswidth is not None else -1
    return width if width >= 0 else sum(char_cells(c) for c in plain)  # -1: a control character


_NARROW_SYMBOLS = frozenset("–—‘’“”•…‰′″←↑→↓↔⇒⇐∀∂∅∈∑−∓√∞∧∨∩∪≈≠≡≤≥⊂⊃⋯─│┌┐└┘├┤┬┴┼═║╭╮╯╰▁▂▃▄▅▆▇█░▒▓■□▲►▼◄▶◀●○✓✗")


def _narrow(plain: str) -> bool:
    """Every character one cell wide for sure (wcwidth agrees: tests/render/test_style_width.py):
    printable Latin-1 and Latin Extended (U+00A0-U+02FF) and the symbols llmpdb's own output uses."""
    return all(("\u00a0" <= c < "\u0300") or c in _NARROW_SYMBOLS for c in plain if not c.isascii()) \
        and plain.isprintable()


def char_cells(char: str) -> int:
    """Usage: ``char_cells("注")`` -> 2; ``"a"`` -> 1; a combining mark or a zero-width space -> 0."""
    try:
        from wcwidth import wcwidth
    except ImportError:
        wcwidth = None
    if wcwidth is not None:
        cells = wcwidth(char)
        if cells >= 0:
            return cells
    import unicodedata

    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def color_enabled(stream, mode: str = "auto") -> bool:
    """Usage: ``color_enabled(sys.stdout)``; True only for a colour-capable terminal.

    In order: ``NO_COLOR`` set -> off; ``LLMPDB_COLOR=1`` -> on; ``mode`` (the config file's ``color``)
    ``"never"`` -> off, ``"always"`` -> on; ``TERM=dumb`` -> off; else on only when ``stream`` is a TTY."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("LLMPDB_COLOR") == "1":
        return True
    if mode in ("never", "always"):
        return mode == "always"
    if os.environ.get("TERM", "") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (ValueError, OSError):
        return False


class Style:
    """ANSI styles that collapse to identity when ``color`` is False. Immutable, compared and hashed by value
    (a plain class rather than a frozen dataclass: it is defined on the way to the first prompt)."""

    __slots__ = ("color", "palette")
    color: bool
    palette: tuple[tuple[str, str], ...]  # (role, SGR code) pairs that replace ROLES' defaults

    def __init__(self, color: bool = False, palette=()):
        object.__setattr__(self, "color", bool(color))
        pairs = palette.items() if hasattr(palette, "items") else palette
        object.__setattr__(self, "palette", tuple((role, color_code(value) if color_code(value) is not None
                                                   else str(value)) for role, value in pairs))

    def __setattr__(self, name, value):
        raise AttributeError(f"Style is immutable: cannot set {name!r}")

    def __eq__(self, other):
        return type(other) is Style and (self.color, self.palette) == (other.color, other.palette)

    def __hash__(self):
        return hash((self.color, self.palette))

    def __repr__(self) -> str:
        return f"Style(color={self.color!r}, palette={self.palette!r})"

    @classmethod
    def for_stream(cls, stream, palette=()) -> "Style":
        return cls(color_enabled(stream), palette)

    def code(self, role: str) -> str:
        """Usage: ``style.code("dtype")`` -> ``"32"``; the SGR code this style uses for ``role``."""
        for name, code in self.palette:
            if name == role:
                return code
        return ROLES.get(role, "")

    def role(self, role: str, text: str) -> str:
        """Usage: ``style.role("dtype", "bf16")``; ``text`` in the colour of ``role``."""
        code = self.code(role)
        return f"\x1b[{code}m{text}\x1b[0m" if self.color and text and code else text

    def header(self, text: str) -> str:
        return self.role("header", text)

    def dim(self, text: str) -> str:
        return self.role("dim", text)

    def path(self, text: str) -> str:
        return self.role("path", text)

    def warn(self, text: str) -> str:
        return self.role("warn", text)

    def bad(self, text: str) -> str:
        return self.role("bad", text)

    def error(self, text: str) -> str:
        return self.role("error", text)

    def dtype(self, text: str) -> str:
        return self.role("dtype", text)

    def device(self, text: str) -> str:
        return self.role("device", text)

    def flag(self, text: str) -> str:
        return self.role("flag", text)
