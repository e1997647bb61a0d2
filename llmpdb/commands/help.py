"""``help``: pdb's commands, then llmpdb's in a group of their own; the banner at the first terminal stop.

Usage (at the prompt)::

    help                 pdb's table, then one line per llmpdb command: name (aliases), summary
    help shapes          usage line, description, options, one example
    help stack-model     hyphenated names and aliases work too

Everything comes from the commands' docstrings: the first line is the usage, the first sentence of the
description is the summary, and an ``Example:`` line gives the example (``help_entries``). The banner
names the five core commands once per process, at the first stop whose input is a terminal (a headless
tour or a pipe never prints it).
"""

from __future__ import annotations

import inspect
import re
from typing import NamedTuple

from ..render.config_file import config
from ..session import SESSION
from ._command import usage_of

__all__ = ["HelpCommands", "HelpEntry", "help_entries", "summary_of", "BANNER"]

BANNER = ("llmpdb: shapes · stack-model (sm) · break-module (bm) · kv · statediff "
          "— `help` lists them, `help NAME` explains one")

class HelpEntry(NamedTuple):
    """One llmpdb command for the listing: its hyphenated name, aliases, usage line and summary."""

    name: str
    aliases: tuple[str, ...]
    usage: str
    summary: str


def summary_of(doc: str | None) -> str:
    """Usage: ``summary_of(do_kv.__doc__)``; the description's first sentence (up to ``.``, ``:`` or ``;``
    and a space, outside backquotes), without its parenthesised asides."""
    lines = inspect.cleandoc(doc or "").splitlines()[1:]
    text = " ".join(line.strip() for line in lines).strip() + " "
    depth, quoted, kept = 0, False, []
    for i, ch in enumerate(text[:-1]):
        if ch == "`":
            quoted = not quoted
        elif not quoted and ch == "(" and text[i + 1] != ")":
            depth += 1
        elif not quoted and ch == ")" and depth:
            depth -= 1
            continue
        elif not quoted and depth == 0 and ch in ".:;" and text[i + 1] == " " and text[i - 1:i] != ".":
            break
        if depth == 0:
            kept.append(ch)
    return re.sub(r"\s+([,;])", r"\1", re.sub(r"\s{2,}", " ", "".join(kept))).strip()


def help_entries(debugger_class: type) -> list[HelpEntry]:
    """Usage: ``help_entries(type(pdb))``; llmpdb's commands, one entry per function, sorted by name."""
    names: dict[int, list[str]] = {}
    funcs: dict[int, object] = {}
    for klass in reversed(debugger_class.__mro__):
        for attr, value in vars(klass).items():
            if attr.startswith("do_") and getattr(value, "llmpdb_command", None):
                key = id(value)
                funcs[key] = value
                name = attr[3:].replace("_", "-")
                if name not in names.setdefault(key, []):
                    names[key].append(name)
    entries = []
    for key, func in funcs.items():
        primary = func.llmpdb_command
        aliases = tuple(sorted(n for n in names[key] if n != primary))
        entries.append(HelpEntry(primary, aliases, usage_of(func), summary_of(func.__doc__)))
    return sorted(entries, key=lambda entry: entry.name)


class HelpCommands:
    """``help`` with llmpdb's group (mixed in before the debugger core) and the first-stop banner."""

    def do_help(self, arg):
        """help [COMMAND]
        Without an argument: pdb's commands, then llmpdb's, one line each. With COMMAND: its usage,
        description, options and an example (hyphenated names and aliases work: help stack-model).
        Example: help shapes"""
        arg = (arg or "").strip()
        if not arg:
            super().do_help(arg)
            self._print_llmpdb_group()
            return None
        method = getattr(self, "do_" + arg.replace("-", "_"), None)
        if getattr(method, "llmpdb_command", None):
            from ..render.table import wrap_lines
            self.message(wrap_lines(inspect.cleandoc(method.__doc__ or f"{arg}: no help"), self.out_width()))
            return None
        return super().do_help(arg)

    do_h = do_help

    def get_names(self):
        """Hide llmpdb's commands (and aliases) from pdb's table: ``help`` lists them in their own group."""
        ours = {"do_" + name.replace("-", "_") for name in self._llmpdb_names()}
        return [name for name in super().get_names() if name not in ours]

    def _print_llmpdb_group(self) -> None:
        entries = help_entries(type(self))
        labels = [entry.name + (f" ({', '.join(entry.aliases)})" if entry.aliases else "") for entry in entries]
        column = max((len(label) for label in labels), default=0) + 2
        width = self.out_width()
        header = "llmpdb commands (help NAME: usage, options, example):"
        self.message(header)
        self.message("=" * len(header))
        for label, entry in zip(labels, entries):
            line = f"{label:<{column}}{entry.summary}"
            if len(line) > width:
                line = line[:max(column + 8, width - 1)].rstrip() + "…"
            self.message(line)

    def preloop(self):
        super().preloop()
        shown = SESSION.memory("help-banner", dict)
        if shown or not config().banner or not self.reads_a_terminal():
            return
        shown["said"] = True
        from ..render.table import wrap_lines
        self.message(wrap_lines(BANNER, self.out_width()))
