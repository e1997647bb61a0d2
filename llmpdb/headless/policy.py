"""What a stop does when nobody can type at it: the headless policy ``attach``, ``log`` or ``skip``.

Usage: mixed into the debugger in front of ``HeadlessMixin`` (``HeadlessPolicyMixin``); chosen by
``LLMPDB_HEADLESS=attach|log|skip`` (``python -m llmpdb --headless POLICY``).

The policy applies when standard input is not a terminal and holds nothing to read: closed, ``/dev/null``,
the process's real stdin that already ran out at an earlier stop, or an open pipe that gives nothing within
``LLMPDB_ATTACH_TIMEOUT`` (``headless.silent_stdin``: ``ssh`` without ``-t``). A pipe or file that holds
commands is read as before. The first stop of ``python -m llmpdb`` (the script's first line) keeps its
meaning (it continues) unless ``--listen`` was given.

- ``attach`` (the default, except under ``CI`` or with ``LLMPDB_TOUR`` set): open this process's listener
  (``llmpdb.remote.listener``), log one line with the command to connect, wait ``LLMPDB_ATTACH_TIMEOUT`` seconds
  (default 120, at most a week) for a client, then log that it gave up and continue. After one give-up, later stops take
  a client that is already waiting but do not wait again, so a forgotten breakpoint costs one timeout.
  A client stays attached across ``c`` until the next stop; Ctrl-D in the client detaches (the program
  continues); a lost connection waits ``LLMPDB_ATTACH_TIMEOUT`` for a re-attach, then continues.
- ``log``: the stop's header and the tour (``LLMPDB_TOUR``, default ``shapes``) go to the debugger's
  output, or to ``LLMPDB_LOG=FILE`` (appended, mode 0600; a link, FIFO or device is refused in one line,
  and a failed write is dropped: ``files.private_file``, ``headless.streams.DroppingOutput``), after a
  line with the time, the place, the module path and the rank; then the program continues. With ``LLMPDB_SNAPSHOT=1``
  (``python -m llmpdb --snapshot``) each logged stop also runs ``snapshot``: one file per stop in the
  current folder, rate-limited with the log (a snapshot over the size limit is refused with one line).
- ``skip``: one line, then continue.

Under ``python -m llmpdb``, ``kill -USR1 PID`` stops the program at its next line (``install_attach_signal``);
at a stop already (its prompt, an attach wait) it is ignored with one line.

Repeated hits of one site (file and line) are rate-limited for ``log``, ``skip`` and the no-wait stops of
``attach``: the first 10 hits are logged, then every 1000th, with a one-line note at the 11th.
Policy lines go to standard error, the job's log (the debugger's output may be the client or the log file).
"""

from __future__ import annotations

import io
import os
import signal
import stat
import sys
import time
import types
from collections import Counter
from typing import TYPE_CHECKING

from ..remote.cleanup import signals_remove_files
from ..session import SESSION
from .stop_lines import in_debugger_code, module_path, stop_line, stop_site, stop_where  # noqa: F401 (stop_line: its old home)
from .streams import stream_is_terminal

if TYPE_CHECKING:  # annotations only: sockets are imported when a listener is opened
    from ..remote.listener import Listener
    from ..remote.seat import Seat

__all__ = ["HeadlessPolicyMixin", "POLICIES", "DEFAULT_ATTACH_TIMEOUT", "LOG_FIRST", "LOG_EVERY",
           "input_is_absent", "chosen_policy", "MAX_ATTACH_TIMEOUT", "client_attached"]

POLICIES = ("attach", "log", "skip")
DEFAULT_ATTACH_TIMEOUT = 120.0
MAX_ATTACH_TIMEOUT = 7 * 24 * 3600.0  # select() refuses far larger timeouts (OverflowError)
LOG_FIRST = 10
LOG_EVERY = 1000


def _log(line: str) -> None:
    stream = sys.stderr if sys.stderr is not None else sys.__stderr__
    try:
        stream.write(line + "\n")
        stream.flush()
    except (OSError, ValueError, AttributeError):
        pass
    SESSION.relay_line(line)  # under torchrun's --local-ranks-filter, a visible rank prints it


def input_is_absent(stream) -> bool:
    """Usage: ``input_is_absent(sys.stdin)``; True for None, a closed stream or fd, and ``/dev/null``."""
    if stream is None or getattr(stream, "closed", False):
        return True
    try:
        fd = stream.fileno()
    except (io.UnsupportedOperation, AttributeError):
        return False  # an in-memory or custom stream (a test's, an attached client's): it holds what it holds
    except (OSError, ValueError):
        return True
    try:
        info = os.fstat(fd)
        null = os.stat(os.devnull)
    except OSError:
        return True
    return stat.S_ISCHR(info.st_mode) and info.st_rdev == null.st_rdev


def chosen_policy() -> str:
    """Usage: ``chosen_policy()`` -> ``"attach"``, ``"log"`` or ``"skip"`` from the environment."""
    explicit = os.environ.get("LLMPDB_HEADLESS", "").strip().lower()
    if explicit in POLICIES:
        return explicit
    if explicit:
        _STATE.note_once(f"llmpdb: LLMPDB_HEADLESS={explicit!r} is not one of attach, log, skip; using log")
        return "log"
    if os.environ.get("CI", "").lower() not in ("", "0", "false") or "LLMPDB_TOUR" in os.environ:
        return "log"
    return "attach"


def _attach_timeout() -> float:
    """``LLMPDB_ATTACH_TIMEOUT`` seconds: the default for what is not a number >= 0 (nan, -1, abc), at most
    ``MAX_ATTACH_TIMEOUT`` (inf, 1e12: capped), with one line each."""
    text = os.environ.get("LLMPDB_ATTACH_TIMEOUT", "").strip()
    try:
        value = float(text) if text else DEFAULT_ATTACH_TIMEOUT
    except (ValueError, OverflowError):
        value = -1.0
    if not value >= 0:
        _STATE.note_once(f"llmpdb: LLMPDB_ATTACH_TIMEOUT={text[:40]!r} is not a number of seconds; "
                         f"using {DEFAULT_ATTACH_TIMEOUT:g}")
        return DEFAULT_ATTACH_TIMEOUT
    if value > MAX_ATTACH_TIMEOUT:
        _STATE.note_once(f"llmpdb: LLMPDB_ATTACH_TIMEOUT={text[:40]!r} is over a week; "
                         f"waiting {MAX_ATTACH_TIMEOUT:g} s")
        return MAX_ATTACH_TIMEOUT
    return value


class _State:
    """Per-process: the listener and its seat, whether a wait gave up, the hits of each site."""

    def __init__(self):
        self.listener: Listener | None = None
        self.seat: Seat | None = None
        self.failed: str | None = None
        self.gave_up = False
        self.stdin_ran_out = False
        self.hits: Counter = Counter()
        self.noted: set[str] = set()
        self.pid = os.getpid()

    def note_once(self, line: str) -> None:
        if line not in self.noted:
            self.noted.add(line)
            _log(line)

    def listener_or_none(self) -> Listener | None:
        from ..remote.cleanup import remove_at_end
        from ..remote.listener import Listener, RemoteError
        from ..remote.seat import Seat
        if self.pid != os.getpid():  # a forked child (a data-loader worker) gets its own listener
            self.__init__()
        if self.listener is None and self.failed is None:
            listener = None
            try:  # a bad LLMPDB_LISTEN is one line at the stop, which goes on
                listener = Listener.from_spec(os.environ.get("LLMPDB_LISTEN", ""), log=_log)
                listener.open()
            except (RemoteError, OSError) as exc:
                self.failed = f"llmpdb: cannot listen: {exc}; stops continue without waiting"
                if listener is not None:
                    listener.close()
                return None
            self.listener, self.seat = listener, Seat(listener)
            remove_at_end(listener, self.close, self.seat)  # atexit, a forked child's exit, SIGTERM/SIGHUP
        return self.listener

    def count(self, site) -> tuple[bool, str | None]:
        """(log this hit?, a one-line note or None)."""
        self.hits[site] += 1
        n = self.hits[site]
        note = None
        if n == LOG_FIRST + 1:
            note = (f"llmpdb: {site[0]}:{site[1]} stopped {LOG_FIRST} times; from now on 1 hit in "
                    f"{LOG_EVERY} is logged")
        return n <= LOG_FIRST or n % LOG_EVERY == 0, note

    def close(self) -> None:
        if self.pid != os.getpid():
            return
        if self.seat is not None:
            self.seat.stop_watching()
            self.seat.leave("Q", "llmpdb: the program ended")
        if self.listener is not None:
            self.listener.close()


_STATE = _State()


def client_attached() -> bool:
    """Usage: ``client_attached()``; True while a client attached at an earlier stop is still connected."""
    seat = _STATE.seat if _STATE.pid == os.getpid() else None
    if seat is None:
        return False
    seat.stop_watching()  # the watcher of a running program reads the same socket
    return seat.still_there()


def _interrupt_main() -> None:
    """The client's Ctrl-C: SIGINT in the main thread, as a Ctrl-C at a local terminal (pdb's handler after
    ``c`` stops at the next line). Sent once the main thread has left the debugger's own code: a stop asked
    for while the debugger is still on its way out of the last stop would be undone by it."""
    import _thread
    import threading

    _log("llmpdb: the client pressed Ctrl-C; interrupting the program")
    main = threading.main_thread().ident
    for _ in range(300):
        frame = sys._current_frames().get(main)
        if frame is None or not in_debugger_code(frame):
            break
        time.sleep(0.01)
    _thread.interrupt_main(signal.SIGINT)


class HeadlessPolicyMixin:
    """``interaction`` picks the policy; ``do_EOF`` ends an attached session or notes that stdin ran out."""

    listen_from_start = False  # python -m llmpdb --listen: every stop goes to the listener
    _llmpdb_seat: Seat | None = None
    _policy_streams = False  # this stop's streams are the policy's (a client, the log): leave them be

    def nobody_can_answer(self) -> bool:
        return self._policy_streams and self._llmpdb_seat is None  # the log policy reads an empty input

    def policy_streams_in_use(self) -> bool:
        return self._policy_streams
    _log_stop = False  # this stop is a logged one of the log policy (its tour may add `snapshot`)

    def _tour_commands(self) -> list[str]:
        commands = super()._tour_commands()
        if self._log_stop and os.environ.get("LLMPDB_SNAPSHOT", "").strip().lower() not in ("", "0", "false"):
            commands.append("snapshot")
        return commands

    def fit_streams(self) -> None:
        """``HeadlessMixin.fit_streams`` points a stop at the process's usable streams; not a stop whose
        streams the policy chose."""
        fit = getattr(super(), "fit_streams", None)
        if fit is not None and not self._policy_streams:
            fit()

    def _input_stream(self):
        """The stream this debugger reads at a stop: the process's stdin when it is on it (``fit_streams``
        may have put an empty stand-in in ``self.stdin`` for a closed one)."""
        process = getattr(self, "_process_streams", None)
        if process is not None and process[0]:
            return sys.stdin
        return self.stdin if self.stdin is not None else sys.stdin

    def _headless_policy(self) -> str | None:
        if self._llmpdb_seat is not None:
            return None
        if self.listen_from_start:
            return "attach"
        stream = self._input_stream()
        if self.initial_stop:  # python -m llmpdb's first line: it continues at end of input
            return "continue" if self._stdin_stays_silent(stream) else None
        if stream_is_terminal(stream):
            return None
        if input_is_absent(stream):
            return chosen_policy()
        if _STATE.stdin_ran_out and stream is sys.stdin and os.environ.get("LLMPDB_HEADLESS"):
            return chosen_policy()
        if self._stdin_stays_silent(stream):
            return chosen_policy()
        return None

    def _stdin_stays_silent(self, stream) -> bool:
        from .silent_stdin import stdin_stays_silent  # an open pipe nobody writes to (ssh without -t)

        return stream is sys.stdin and stdin_stays_silent(stream, _attach_timeout(), _log)

    def stop_headless_policy(self, stop, proceed):
        """Stop stage ``headless policy``: with no terminal to read, attach a client, log a tour, or skip."""
        policy = self._headless_policy()
        if policy is None:
            return proceed()
        frame, tb = stop.frame, stop.tb_or_exc
        if frame is None and tb is not None:
            if not isinstance(tb, types.TracebackType):  # an exception (3.13's pdb): its own field, no property
                from .exception_text import exception_field

                tb = exception_field(tb, "__traceback__")
            while tb is not None and tb.tb_next is not None:
                tb = tb.tb_next
            frame = tb.tb_frame if tb is not None else None
        run = {"skip": self._headless_skip, "log": self._headless_log, "attach": self._headless_attach,
               "continue": self._headless_continue}[policy]
        return run(frame, proceed)

    # ---- skip and log ---------------------------------------------------------------------------------
    def _headless_continue(self, frame, proceed):  # python -m llmpdb's first line, stdin silent: as at its end
        self.initial_stop = False
        self.set_continue()

    def _headless_skip(self, frame, proceed):
        logged, note = _STATE.count(stop_site(frame))
        if note:
            _log(note)
        if logged:
            _log(stop_line("skip", frame) + ": continuing")
        self.set_continue()

    def _headless_log(self, frame, proceed):
        logged, note = _STATE.count(stop_site(frame))
        if not logged:
            if note:
                _log(note)
            self.set_continue()
            return None
        log_file = self._log_file()
        self.fit_streams()  # the process's streams first (a closed stdout writes to stderr), then the policy's
        saved = self.stdin, self.stdout, self.use_rawinput
        self.stdin, self.use_rawinput = io.StringIO(""), 0  # the stop reads end of input at once: the tour
        if log_file is not None:
            self.stdout = log_file
        self._policy_streams = self._log_stop = True
        try:
            if note:
                self.message(note)
            self.message(stop_line("log", frame))
            return proceed()
        finally:
            self.stdin, self.stdout, self.use_rawinput = saved
            self._policy_streams = self._log_stop = False
            if log_file is not None:
                log_file.close()

    def _log_file(self):
        path = os.environ.get("LLMPDB_LOG", "")
        if not path:
            return None
        from ..files.private_file import PrivateFileError, append_private
        from .streams import DroppingOutput

        try:  # never through a link, never a FIFO or a device, made 0600: files.private_file
            return DroppingOutput(append_private(path), name=f"LLMPDB_LOG={path}")
        except PrivateFileError as exc:
            _STATE.note_once(f"llmpdb: LLMPDB_LOG: {exc}; logging to the output")
            return None

    # ---- attach ---------------------------------------------------------------------------------------
    def _headless_attach(self, frame, proceed):
        listener = _STATE.listener_or_none()
        if listener is None:
            _STATE.note_once(_STATE.failed)
            return self._headless_skip(frame, proceed)
        seat = _STATE.seat
        seat.stop_watching()
        if not seat.still_there():
            wait = 0.0 if _STATE.gave_up else _attach_timeout()
            logged, note = _STATE.count(stop_site(frame)) if _STATE.gave_up else (True, None)
            if note:
                _log(note)
            if logged:
                waiting = f"waiting {wait:g} s for a client" if wait else "a client already waiting gets it"
                _log(f"{stop_line('attach', frame)}: {waiting}: {listener.connect_command()}")
            with signals_remove_files():  # SIGTERM/SIGHUP now: the .sock/.token files go, the process dies
                conn = listener.wait_client(time.time() + wait)
            if conn is None:
                if not _STATE.gave_up:
                    _log(f"llmpdb: no client attached within {wait:g} s; continuing (later stops take a client "
                         "that is already waiting, without waiting; LLMPDB_ATTACH_TIMEOUT=SECONDS waits longer)")
                _STATE.gave_up = True
                self.set_continue()
                return None
            seat.take(conn)
            _log(f"llmpdb: {conn.who} attached")
        return self._attached_interaction(seat, frame, proceed)

    def _attached_interaction(self, seat: Seat, frame, proceed):
        self.fit_streams()  # the process's streams, to come back to after the client's
        saved = self.stdin, self.stdout, self.use_rawinput, self._color, self._width
        self._seat_in(seat, frame)
        try:
            return proceed()
        finally:
            self._llmpdb_seat, self._policy_streams = None, False
            self.stdin, self.stdout, self.use_rawinput, self._color, self._width = saved
            if seat.ended == "detach":
                seat.leave("Q", "llmpdb: detached; the program continues")
                _log("llmpdb: the client detached; the program continues")
            elif getattr(self, "quitting", False):
                seat.leave("Q", "llmpdb: quit (as `q` at a local prompt: the debugger stops the program)")
                _log(f"llmpdb: {seat.conn.who if seat.conn else 'the client'} quit")
            elif seat.conn is not None and seat.conn.alive:
                seat.leave("C", "llmpdb: the program continues; you stay attached until its next stop "
                                "(Ctrl-C stops it, as at a local prompt; Ctrl-D detaches)")
                seat.watch(_interrupt_main)

    def _seat_in(self, seat: Seat, frame) -> None:
        hello = seat.conn.hello
        self.stdin, self.stdout, self.use_rawinput = seat.stdin, seat.stdout, 0
        self._policy_streams = True
        self._color = bool(hello.get("color"))
        columns = hello.get("columns")
        self._width = columns if isinstance(columns, int) and 20 <= columns <= 1000 else self._width
        self._llmpdb_seat = seat
        try:
            names = sorted(set(self.completenames("")))
        except Exception:  # completion is a nicety: attach without it
            names = []
        import json

        seat.conn.send("W", json.dumps({"pid": os.getpid(), "where": stop_where(frame) + module_path(frame),
                                        "commands": names}))

    def do_EOF(self, arg):
        """EOF
        End of input. On a terminal (Ctrl-D) it quits like pdb. Without a terminal (a batch job, a pipe
        that ran out) it runs the tour (LLMPDB_TOUR, default "shapes") and continues the program. From an
        attached client (Ctrl-D there) it detaches and continues; a lost client may re-attach."""
        seat = self._llmpdb_seat
        if seat is None:
            if self.stdin is sys.stdin and not stream_is_terminal(sys.stdin):
                _STATE.stdin_ran_out = True
            return super().do_EOF(arg)
        if seat.ended == "drop":
            wait = _attach_timeout()
            _log(f"llmpdb: the client's connection was lost; waiting {wait:g} s for a re-attach: "
                 f"{seat.listener.connect_command()}")
            with signals_remove_files():
                conn = seat.listener.wait_client(time.time() + wait)
            if conn is not None:
                seat.take(conn)
                _log(f"llmpdb: {conn.who} attached")
                self._seat_in(seat, self.curframe)
                self.print_stack_entry(self.stack[self.curindex])
                return None
            _log(f"llmpdb: no client came back within {wait:g} s; continuing")
            seat.conn = None
        self.set_continue()
        return 1
