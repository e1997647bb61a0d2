"""``python -m llmpdb [-c CMD]... [--no-compile] [--report PATH] [-m] target [args]`` — run a script under llmpdb.

Usage::

    python -m llmpdb examples/infer.py          # stop at the first line; `c` runs to the first breakpoint()
    python -m llmpdb -c continue train.py --lr 1e-3
    python -m llmpdb -m package.module

Same meaning as ``python -m pdb``: ``-c`` commands run at the first stop, ``-m`` runs a module, and every
``breakpoint()`` in the program (installed modeling files included) opens llmpdb. Unlike pdb, the program
is not restarted when it ends: llmpdb exits with the program's status. An uncaught exception opens a
post-mortem session, then exits with status 1; without a terminal, or with ``--report PATH``, it writes a
crash report (``llmpdb.headless.crash_report``) instead and exits with status 1 at once. ``--no-compile`` sets ``TORCHDYNAMO_DISABLE=1`` so that
``torch.compile`` runs eagerly and every local is visible. Without a terminal, each stop runs the tour
(``LLMPDB_TOUR``, default ``shapes``) and continues, so a batch job never hangs.
"""

from __future__ import annotations

import getopt
import os
import sys
import traceback

__all__ = ["main", "USAGE"]

_LISTEN_FROM_START = False  # --listen: every stop, the first line's included, waits for a client
_REPORT: str | None = None  # --report PATH: an uncaught exception writes a crash report there and exits 1

USAGE = """usage: python -m llmpdb [-c command]... [--no-compile] (-m module | pyfile) [arg]...
       python -m llmpdb attach [TARGET] [--token-file FILE]
       python -m llmpdb open FILE      (a prompt on a file saved by `snapshot` or `dump`)

Debug the Python program given by pyfile (or the module with -m), with llmpdb's model-aware commands.
Every breakpoint() in the program opens llmpdb.

  -c CMD, --command CMD  run CMD at the first stop, as if typed (repeatable), e.g. -c continue
  --no-compile           set TORCHDYNAMO_DISABLE=1: torch.compile runs eagerly, all locals are visible
  --headless POLICY      what a stop does with no terminal: attach (default), log or skip
  --listen ADDR          every stop waits for `python -m llmpdb attach` (ADDR: unix, PATH, tcp, tcp:PORT,
                         HOST:PORT or PORT; TCP on loopback unless --listen-public)
  --listen-public        allow --listen on a host other than loopback (LLMPDB_LISTEN_PUBLIC=1): other
                         machines may reach it, with the token kept in a 0600 file
  --commands "a; b"      the commands the log policy runs at each stop (sets LLMPDB_TOUR)
  --log FILE             where the log policy writes (sets LLMPDB_LOG)
  --rank N               under torchrun, the rank that prompts (default 0; sets LLMPDB_RANK)
  --snapshot             the log policy also writes a `snapshot` file per logged stop (LLMPDB_SNAPSHOT=1)
  --report PATH          an uncaught exception writes a crash report to PATH and exits 1 (no prompt)
  -m                     run a library module as a script
  -h, --help             show this help
  --version              show the llmpdb version and its debugger base

Environment: LLMPDB_DISABLE=1 or PYTHONBREAKPOINT=0 make breakpoint() a no-op; LLMPDB_TOUR="shapes;where"
sets what runs at each stop when there is no terminal; LLMPDB_BASE=stdlib forces the standard pdb base.
"""


def _parse(argv: list[str]):
    try:
        opts, args = getopt.getopt(argv, "mhc:", ["help", "command=", "no-compile", "version", "headless=",
                                                  "listen=", "commands=", "log=", "rank=", "snapshot",
                                                  "report=", "listen-public"])
    except getopt.GetoptError as exc:
        print(f"llmpdb: {exc}", file=sys.stderr)
        print(USAGE, file=sys.stderr)
        raise SystemExit(2) from None
    names = [name for name, _ in opts]
    if "-h" in names or "--help" in names:
        print(USAGE)
        raise SystemExit(0)
    if "--version" in names:
        from ..version import __version__
        from ..base import BASE_FALLBACK_REASON, BASE_NAME

        extra = f" ({BASE_FALLBACK_REASON})" if BASE_FALLBACK_REASON else ""
        print(f"llmpdb {__version__} on {BASE_NAME}{extra}, Python {sys.version.split()[0]}")
        raise SystemExit(0)
    if not args:
        print(USAGE, file=sys.stderr)
        raise SystemExit(2)
    for name, value in opts:  # the headless policy's options are environment settings (llmpdb.headless.policy)
        if name == "--rank" and not value.isdigit():
            print(f"llmpdb: --rank needs a rank number (0, 1, ...), not {value!r}", file=sys.stderr)
            raise SystemExit(2)
        env = {"--headless": "LLMPDB_HEADLESS", "--listen": "LLMPDB_LISTEN", "--commands": "LLMPDB_TOUR",
               "--log": "LLMPDB_LOG", "--rank": "LLMPDB_RANK"}.get(name)
        if env:
            os.environ[env] = value
    if "--snapshot" in names:
        os.environ["LLMPDB_SNAPSHOT"] = "1"
    if "--listen-public" in names:
        os.environ["LLMPDB_LISTEN_PUBLIC"] = "1"
    if "--listen" in names:  # a bad address is a usage error now, not a line at the first stop
        from ..remote.address import RemoteError, check_listen

        try:
            check_listen(os.environ["LLMPDB_LISTEN"])
        except RemoteError as exc:
            print(f"llmpdb: --listen: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
    global _LISTEN_FROM_START, _REPORT
    _LISTEN_FROM_START = "--listen" in names
    _REPORT = next((value for name, value in opts if name == "--report"), None)
    commands = [value for name, value in opts if name in ("-c", "--command")]
    return commands, "-m" in names, "--no-compile" in names, args


def main(argv: list[str] | None = None) -> None:
    """Run the debugger over a script or module; exits with the program's status."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["attach"] and not os.path.exists("attach"):  # a script named attach still runs
        from .attach import main as attach_main

        raise SystemExit(attach_main(argv[1:]))
    if argv[:1] == ["ranks"] and not os.path.exists("ranks"):  # python -m llmpdb ranks --job: a hung job
        from ..ranks.jobs import main as ranks_main

        raise SystemExit(ranks_main(argv[1:]))
    if argv[:1] == ["open"] and not os.path.exists("open"):  # python -m llmpdb open FILE: a saved snapshot
        from .open_file import open_main

        raise SystemExit(open_main(argv[1:]))
    commands, as_module, no_compile, args = _parse(argv)
    if no_compile:
        os.environ["TORCHDYNAMO_DISABLE"] = "1"

    from ..base import stdlib_pdb
    from ..debugger.core import Pdb
    from ..headless.policy import install_attach_signal
    from ..hooks import install, set_debugger

    from .targets import program_target

    try:
        target = program_target(stdlib_pdb, args[0], as_module)
        check = getattr(target, "check", None)
        if check is not None:
            check()
    except SystemExit:
        raise
    except Exception as exc:
        print(f"llmpdb: cannot run {args[0]!r}: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    sys.argv[:] = args

    debugger = Pdb()
    set_debugger(debugger)
    install()
    install_attach_signal()  # kill -USR1 PID: stop at the next line (and wait for a client without a terminal)
    debugger.rcLines.extend(commands)
    debugger.initial_stop = True
    debugger.listen_from_start = _LISTEN_FROM_START
    raise SystemExit(_run(debugger, target))


def _run(debugger, target) -> int:
    from ..debugger.restart import RESTART

    debugger.restartable = True  # `run` at a stop raises RESTART: caught here, the program runs again
    while True:  # one pass a run of the program: `run`/`restart` at a stop (pdb's Restart) runs it again
        try:
            debugger._run(target)
        except RESTART:
            _restarting(debugger, target)
            continue
        except SystemExit as exc:
            code = exc.code
            _say(f"llmpdb: the program exited via sys.exit({code!r})")
            if code is None:
                return 0
            return code if isinstance(code, int) else 1
        except SyntaxError:
            traceback.print_exc()
            return 1
        except BaseException as exc:
            from ..headless.exception_text import exception_field, python_traceback_text

            _print_error(python_traceback_text(exc))
            if _crash_report_ends(debugger, exc):
                return 1
            _say("llmpdb: uncaught exception; post-mortem debugging (`c` or `q` ends the program)")
            try:
                debugger.interaction(None, exception_field(exc, "__traceback__"))
            except RESTART:
                _restarting(debugger, target)
                continue
            return 1
        if getattr(debugger, "_user_requested_quit", False):
            _say("llmpdb: quit")
            return 0
        _say("llmpdb: the program finished")
        return 0


def _crash_report_ends(debugger, exc: BaseException) -> bool:
    """With ``--report PATH``, or with no terminal to prompt at: write the crash report (llmpdb.headless.crash_report)
    and say where in one line on stderr. True when the program ends now; False to open the post-mortem:
    a terminal without --report, and without a terminal only a client that can attach to it (an explicit
    ``attach`` policy or ``--listen``, or a client still attached), after the report is written."""
    policy = debugger._headless_policy()
    if _REPORT is None and policy is None:
        return False
    from ..headless.crash_report import report_destination, save_crash_report
    from ..headless.policy import client_attached

    _, line = save_crash_report(exc, report_destination(_REPORT))
    _print_error(line + "\n")
    attach = policy == "attach" and (os.environ.get("LLMPDB_HEADLESS", "").strip().lower() == "attach"
                                     or os.environ.get("LLMPDB_LISTEN") or client_attached())
    return _REPORT is not None or not attach


def _print_error(text: str) -> None:
    """Write to stderr (``sys.__stderr__`` when the program replaced it with None); a closed or full one
    drops it."""
    stream = sys.stderr if sys.stderr is not None else sys.__stderr__
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError, AttributeError):
        pass


def _restarting(debugger, target) -> None:
    _say(f"llmpdb: restarting {target} with arguments: {' '.join(sys.argv[1:])}".rstrip())
    debugger.initial_stop = True


def _say(text: str) -> None:
    """Print one of llmpdb's own lines to stdout, or to stderr when stdout is closed (``>&-``); a write that
    fails (``>/dev/full``) is dropped."""
    from ..headless.streams import DroppingOutput, output_stream

    print(text, file=DroppingOutput(output_stream(sys.stdout, sys.stderr)))
