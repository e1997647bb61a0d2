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

import os
import sys
import traceback

from .parser import apply_to_environment, parse_command_line

__all__ = ["main"]

_LISTEN_FROM_START = False  # --listen: every stop, the first line's included, waits for a client
_REPORT: str | None = None  # --report PATH: an uncaught exception writes a crash report there and exits 1

def main(argv: list[str] | None = None) -> None:
    """Run the debugger over a script or module; exits with the program's status."""
    argv = sys.argv[1:] if argv is None else argv
    command, options = parse_command_line(argv)
    if command == "attach":
        from .attach import main as attach_main

        raise SystemExit(attach_main(options.rest))
    if command == "ranks":  # python -m llmpdb ranks --job: a hung job
        from ..ranks.jobs import main as ranks_main

        raise SystemExit(ranks_main(options.rest))
    if command == "open":  # python -m llmpdb open FILE: a saved snapshot
        from .open_file import open_main

        raise SystemExit(open_main(options.rest))
    apply_to_environment(options)
    global _LISTEN_FROM_START, _REPORT
    _LISTEN_FROM_START, _REPORT = options.listen is not None, options.report
    commands, as_module, args = options.command, options.module, [options.target, *options.args]

    from ..base import stdlib_pdb
    from ..debugger.core import Pdb
    from ..headless.stop_signal import install_attach_signal
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
            from ..ranks.store import EXIT_CODE

            EXIT_CODE[:] = [code if isinstance(code, int) or code is None else 1]  # `ranks`: exited (code N)
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
