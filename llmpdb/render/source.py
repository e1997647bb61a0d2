"""Python source lines coloured with pygments for a colour terminal.

Usage::

    highlight_lines(["def f(x):\n", "    return x\n"])   # same number of lines, ANSI colours added
    highlight_line("x = f(1)")                            # one line, no newline added

The lines are highlighted as one block, so a line inside a multi-line string keeps the string's colour
within the block. Text that already holds escape sequences (a base debugger coloured it) is returned
unchanged, so colour is never applied twice; so is anything pygments fails on.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["highlight_lines", "highlight_line"]

_HIGHLIGHTER: list = []


def _highlighter():
    if not _HIGHLIGHTER:
        try:
            from pygments import highlight
            from pygments.formatters import TerminalFormatter
            from pygments.lexers import PythonLexer

            lexer = PythonLexer(stripnl=False, stripall=False, ensurenl=False)
            formatter = TerminalFormatter(bg="dark")
            _HIGHLIGHTER.append(lambda text: highlight(text, lexer, formatter))
        except Exception:  # pygments missing or broken: plain source
            _HIGHLIGHTER.append(None)
    return _HIGHLIGHTER[0]


def highlight_lines(lines: Sequence[str]) -> list[str]:
    """Usage: ``highlight_lines(linecache.getlines(path)[10:20])``; each line keeps its own newline."""
    lines = list(lines)
    paint = _highlighter()
    if paint is None or not lines or any("\x1b" in line for line in lines):
        return lines
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    try:
        out = paint(text).split("\n")
    except Exception:  # colour is cosmetic: a lexer failure shows the lines plain (the listing itself is intact)
        return lines
    if out and out[-1] == "":
        out.pop()
    if len(out) != len(lines):
        return lines
    return [new + ("\n" if old.endswith("\n") else "") for new, old in zip(out, lines)]


def highlight_line(line: str) -> str:
    """Usage: ``highlight_line("return x + 1")``; one line without a newline."""
    return highlight_lines([line.rstrip("\n")])[0].rstrip("\n")
