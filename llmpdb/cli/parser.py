"""The command line of ``python -m llmpdb``: one ``argparse`` parser, its subcommands, and ``--help``.

Usage::

    command, options = parse_command_line(sys.argv[1:])
    # command: "run" (options.target, options.args, options.command, ...), or "attach" / "open" / "ranks"
    #          (options.rest: the words after it, for that subcommand's own checks)

The first word decides: ``attach``, ``open`` and ``ranks`` are subcommands whatever files the current folder
holds (a script of that name runs as ``./attach``); anything else is the run form, whose options come before
the script or module and whose remaining words go to the program unchanged (``train.py --lr 1e-3``).
``--help`` lists every form, ``ranks --job`` included, wrapped to the terminal's width. Mistakes are usage
errors: one line and exit status 2.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap

__all__ = ["parse_command_line", "build_parser", "SUBCOMMANDS", "usage_text"]

SUBCOMMANDS = {
    "attach": ("[TARGET] [--token-file FILE]", "the prompt of a job paused at a stop (no TARGET lists them)"),
    "open": ("[--yes] [--max-mib N] FILE", "a prompt on a file saved by `snapshot` or `dump`"),
    "ranks": ("--job [RUN_ID] [--timeout SECONDS]", "every rank's stack and shapes of a running torchrun job"),
}
_POLICY_ENV = {"headless": "LLMPDB_HEADLESS", "listen": "LLMPDB_LISTEN", "commands": "LLMPDB_TOUR",
               "log": "LLMPDB_LOG", "rank": "LLMPDB_RANK"}


class _Parser(argparse.ArgumentParser):
    """Usage errors in llmpdb's words: ``llmpdb: MESSAGE`` and the usage lines, exit status 2."""

    def error(self, message: str):  # noqa: D102 - argparse's hook
        self.exit(2, f"llmpdb: {message}\n{usage_text()}")


def _rank_number(text: str) -> str:
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"needs a rank number (0, 1, ...), not {text!r}")
    return text


def usage_text() -> str:
    """The usage lines of every form of the command."""
    lines = ["usage: python -m llmpdb [OPTIONS] (-m MODULE | PYFILE) [ARG]..."]
    lines += [f"       python -m llmpdb {name} {args}" for name, (args, _) in SUBCOMMANDS.items()]
    return "\n".join(lines) + "\n"


class _Formatter(argparse.HelpFormatter):
    """argparse's wrapping (to the terminal's width), except that the epilog keeps its lines."""

    def _fill_text(self, text, width, indent):
        return "\n".join(line if line.startswith(" ") else textwrap.fill(line, width, initial_indent=indent,
                                                                          subsequent_indent=indent)
                         for line in text.splitlines())


def build_parser() -> argparse.ArgumentParser:
    """The parser of the run form; its help lists the subcommands too."""
    subcommands = "\n".join(f"  {name} {args}\n      {what}" for name, (args, what) in SUBCOMMANDS.items())
    parser = _Parser(
        prog="python -m llmpdb", usage=usage_text()[len("usage: "):],
        description="Debug the Python program given by PYFILE (or the module with -m) with llmpdb's "
                    "model-aware commands. Every breakpoint() in the program opens llmpdb.",
        epilog=f"subcommands:\n{subcommands}\n\nEnvironment: LLMPDB_DISABLE=1 or PYTHONBREAKPOINT=0 make "
               "breakpoint() a no-op; LLMPDB_TOUR=\"shapes;where\" sets what runs at each stop when there is "
               "no terminal; LLMPDB_BASE=stdlib forces the standard pdb base.",
        formatter_class=_Formatter, add_help=False, allow_abbrev=False)
    add = parser.add_argument
    add("-c", "--command", action="append", default=[], metavar="CMD",
        help="run CMD at the first stop, as if typed (repeatable), e.g. -c continue")
    add("--no-compile", action="store_true",
        help="set TORCHDYNAMO_DISABLE=1: torch.compile runs eagerly, all locals are visible")
    add("--headless", choices=("attach", "log", "skip"),
        help="what a stop does with no terminal: attach (default), log or skip")
    add("--listen", metavar="ADDR", help="every stop waits for `python -m llmpdb attach` (ADDR: unix, unix:PATH, "
                                         "tcp, tcp:PORT, HOST:PORT or PORT; TCP on loopback unless --listen-public)")
    add("--listen-public", action="store_true", help="allow --listen on a host other than loopback "
                                                     "(LLMPDB_LISTEN_PUBLIC=1), with the token kept in a 0600 file")
    add("--commands", metavar='"a; b"', help="the commands the log policy runs at each stop (sets LLMPDB_TOUR)")
    add("--log", metavar="FILE", help="where the log policy writes (sets LLMPDB_LOG)")
    add("--rank", metavar="N", type=_rank_number,
        help="under torchrun, the rank that prompts (default 0; sets LLMPDB_RANK)")
    add("--snapshot", action="store_true",
        help="the log policy also writes a `snapshot` file per logged stop (LLMPDB_SNAPSHOT=1)")
    add("--report", metavar="PATH", help="an uncaught exception writes a crash report to PATH and exits 1")
    add("-m", dest="module", action="store_true", help="run a library module as a script")
    add("-h", "--help", action="store_true", help="show this help")
    add("--version", action="store_true", help="show the llmpdb version and its debugger base")
    add("target", nargs="?", help=argparse.SUPPRESS)
    add("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def parse_command_line(argv: list[str]) -> tuple[str, argparse.Namespace]:
    """Usage: see the module docstring. Exits (status 0 or 2) for --help, --version and usage errors."""
    if argv[:1] and argv[0] in SUBCOMMANDS:
        return argv[0], argparse.Namespace(rest=list(argv[1:]))
    parser = build_parser()
    options = parser.parse_args(argv)
    if options.help:
        parser.print_help()
        raise SystemExit(0)
    if options.version:
        from ..base import BASE_FALLBACK_REASON, BASE_NAME
        from ..version import __version__

        extra = f" ({BASE_FALLBACK_REASON})" if BASE_FALLBACK_REASON else ""
        print(f"llmpdb {__version__} on {BASE_NAME}{extra}, Python {sys.version.split()[0]}")
        raise SystemExit(0)
    if not options.target:
        parser.exit(2, usage_text())
    if options.listen is not None:  # a bad address is a usage error now, not a line at the first stop
        from ..remote.address import RemoteError, check_listen

        if options.listen_public:
            os.environ["LLMPDB_LISTEN_PUBLIC"] = "1"
        try:
            check_listen(options.listen)
        except RemoteError as exc:
            parser.exit(2, f"llmpdb: --listen: {exc}\n")
    return "run", options


def apply_to_environment(options: argparse.Namespace) -> None:
    """The headless policy's options are environment settings (``llmpdb.headless.policy`` reads them)."""
    for name, env in _POLICY_ENV.items():
        value = getattr(options, name)
        if value is not None:
            os.environ[env] = value
    if options.snapshot:
        os.environ["LLMPDB_SNAPSHOT"] = "1"
    if options.listen_public:
        os.environ["LLMPDB_LISTEN_PUBLIC"] = "1"
    if options.no_compile:
        os.environ["TORCHDYNAMO_DISABLE"] = "1"
