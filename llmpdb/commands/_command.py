"""Shared plumbing for debugger commands: error isolation, usage lines, one argument parser.

Usage::

    class ShapesCommands:
        @command
        def do_shapes(self, arg):
            \"\"\"shapes [EXPR] [--stats]
            ...\"\"\"
            args = parse_args(arg, self.do_shapes, flags={"--stats"})
            value = self.eval_in_frame(args.rest)   # the expression, exactly as typed
            if args.flag("--stats"): ...

``@command`` isolates a command: a ``CommandError`` prints its one-line message, any other exception
(``SystemExit`` and ``KeyboardInterrupt`` from the user's expression included) prints one line naming
the command, and the debuggee keeps running.

``parse_args`` recognises flags only as whole words outside brackets and quotes (``d[' --stats ']`` is an
expression, not a flag); what is left is handed over untouched (``rest``) and as top-level words
(``words``, quotes kept: ``mods['enc']`` stays ``mods['enc']``).
"""

from __future__ import annotations

import functools
import inspect
import traceback
from typing import Any, Callable

__all__ = ["CommandError", "command", "usage_of", "parse_args", "Args", "split_words", "whole_number"]


class CommandError(Exception):
    """A user-facing, one-line error: bad arguments, a bad expression, nothing to show."""


def usage_of(func_or_doc: Any) -> str:
    """Usage: ``usage_of(self.do_shapes)`` -> ``"shapes [EXPR] [--stats]"``; the docstring's first line."""
    doc = func_or_doc if isinstance(func_or_doc, str) else getattr(func_or_doc, "__doc__", None)
    lines = inspect.cleandoc(doc or "").splitlines()
    return lines[0].strip() if lines else ""


def command(func):
    """Wrap a ``do_*`` method so no exception escapes into the debugger loop or the debuggee."""

    name = func.__name__[3:].replace("_", "-")

    @functools.wraps(func)
    def wrapper(self, arg):
        try:
            return func(self, arg)
        except CommandError as exc:
            self.error(f"{name}: {exc}")
        except KeyboardInterrupt:
            self.error(f"{name}: interrupted")
        except SystemExit as exc:  # raised by the user's expression (argparse...): never ends the program
            self.error(f"{name}: the expression raised SystemExit: {exc.code!r} (the program goes on)")
        except Exception as exc:  # an llmpdb bug must never kill the user's job
            where = traceback.extract_tb(exc.__traceback__)[-1]
            self.error(
                f"{name}: internal error {type(exc).__name__}: {exc} "
                f"(at {where.filename.rsplit('/', 1)[-1]}:{where.lineno}; the program is unaffected)"
            )
        return None

    wrapper.llmpdb_command = name
    return wrapper


_OPEN, _CLOSE = "([{", ")]}"


def _tokens(text: str) -> list[tuple[int, int]]:
    """Spans of the words of ``text`` split on whitespace outside quotes and brackets."""
    spans: list[tuple[int, int]] = []
    start, depth, quote, i = None, 0, "", 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth = max(0, depth - 1)
        elif ch.isspace() and depth == 0:
            if start is not None:
                spans.append((start, i))
                start = None
            i += 1
            continue
        if start is None:
            start = i
        i += 1
    if quote or depth:
        raise CommandError(f"cannot parse arguments: unclosed {'quote' if quote else 'bracket'} in {text.strip()!r}")
    if start is not None:
        spans.append((start, len(text)))
    return spans


def split_words(text: str) -> list[str]:
    """Usage: ``split_words("m {k: v for k, v in sd.items()}")`` -> 2 words; quotes and brackets kept."""
    return [text[a:b] for a, b in _tokens(text or "")]


class Args:
    """Parsed arguments: ``rest`` (the text left, untouched), ``words`` (its top-level words), options."""

    __slots__ = ("rest", "words", "options")

    def __init__(self, rest: str, words: list[str], options: dict[str, Any] | None = None):
        self.rest, self.words = rest, words
        self.options: dict[str, Any] = {} if options is None else options

    def flag(self, name: str) -> bool:
        return bool(self.options.get(name))

    def value(self, name: str, default: Any = None) -> Any:
        return self.options.get(name, default)


def whole_number(low: int, high: int) -> Callable[[str], int]:
    """Usage: ``options={"--depth": whole_number(0, 1000)}``; a converter accepting only the digits of a whole
    number from ``low`` to ``high`` (no sign games, fractions, exponents or 5000-digit numbers)."""
    def convert(text: str) -> int:
        digits = text.strip()
        body = digits[1:] if digits[:1] in "+-" else digits
        if not body.isascii() or not body.isdigit() or len(body) > 30:
            raise ValueError(f"needs a whole number from {low} to {high}")
        value = int(digits)
        if not low <= value <= high:
            raise ValueError(f"needs a whole number from {low} to {high}")
        return value
    return convert


def _is_option_word(word: str) -> bool:
    return word.startswith("--") and len(word) > 2 and word[2].isalpha()


def parse_args(arg: str | None, usage: Any = "", *, flags: set[str] | frozenset[str] = frozenset(),
               options: dict[str, Callable[[str], Any]] | None = None,
               aliases: dict[str, str] | None = None, hint: str | None = None) -> Args:
    """Usage: ``parse_args("x --after 3", usage, flags={"--once"}, options={"--after": int})``.

    ``flags`` take no value; ``options`` take one (``--after 3`` or ``--after=3``) converted by the given
    function (a ``ValueError`` becomes a clear error). ``aliases`` maps short spellings (``-l``) to names.
    An unknown ``--word`` outside brackets and quotes is an error naming the usage (or ``hint``)."""
    text = arg or ""
    options = options or {}
    aliases = aliases or {}
    usage_text = usage_of(usage) if not isinstance(usage, str) or "\n" in usage else usage
    hint = f" ({hint})" if hint else (f" (usage: {usage_text})" if usage_text else "")
    spans = _tokens(text)
    found: dict[str, Any] = {}
    cut: list[tuple[int, int]] = []
    i = 0
    while i < len(spans):
        a, b = spans[i]
        word = text[a:b]
        name, has_value, value = word, False, None
        if "=" in word and _is_option_word(word):
            name, _, value = word.partition("=")
            has_value = True
        name = aliases.get(name, name)
        if name in flags and not has_value:
            found[name] = True
            cut.append((a, b))
        elif name in options:
            if not has_value:
                if i + 1 >= len(spans):
                    raise CommandError(f"{name} needs a value{hint}")
                i += 1
                value = text[spans[i][0]:spans[i][1]]
                b = spans[i][1]
            try:
                found[name] = options[name](value)
            except (TypeError, ValueError) as exc:
                detail = f": {exc}" if str(exc) and "invalid literal" not in str(exc) else ""
                shown = value if len(value) <= 40 else value[:24] + "…" + value[-12:]
                raise CommandError(f"bad value for {name}: {shown!r}{detail}{hint}") from None
            cut.append((a, b))
        elif _is_option_word(word):
            raise CommandError(f"unknown option {name}{hint}")
        i += 1
    pieces, last = [], 0
    for a, b in cut:
        pieces.append(text[last:a])
        last = b
    pieces.append(text[last:])
    rest = " ".join(p.strip() for p in pieces if p.strip())
    return Args(rest, split_words(rest), found)
