"""The attached client as the debugger's standard input and output for a stop (file-like wrappers).

Usage::

    seat = Seat(listener)
    seat.conn = listener.wait_client(deadline)
    debugger.stdin, debugger.stdout = seat.stdin, seat.stdout   # cmd.Cmd reads lines, writes text
    debugger.cmdloop()                                          # the stop, read from the client
    seat.ended      # None while attached; "detach" (Ctrl-D in the client) or "drop" (connection lost)

Output is sent in whole lines (``O`` frames, a line over 1 MiB in several); when the debugger reads a line,
the text after the last newline (the prompt, at most ``PROMPT_LIMIT`` characters: what is before goes as
output) goes in a ``P`` frame, so the client can show it as its line editor's prompt. While the debugger
waits for a line, a second client is told who holds the session and closed; the attached client's frames
come first, and a newcomer's hello gets ``HELD_HELLO_SECONDS`` in all. Nothing here raises into the
debugger: a lost connection is an end of input.
"""

from __future__ import annotations

import io
import os
import select
import threading
import time
from typing import Callable

from .listener import HELD_HELLO_SECONDS, Connection, Listener

__all__ = ["Seat", "PROMPT_LIMIT"]

PROMPT_LIMIT = 4096


class _SeatOutput:
    encoding = "utf-8"
    errors = "replace"
    closed = False

    def __init__(self, seat: "Seat"):
        self._seat = seat
        self._buffer = ""

    def write(self, text) -> int:
        text = str(text)
        self._buffer += text
        if "\n" in text and len(self._buffer) > 8192:
            self.flush()
        return len(text)

    def flush(self) -> None:
        """Send the whole lines written so far; the partial last line waits (it may be the prompt)."""
        cut = self._buffer.rfind("\n") + 1
        if cut:
            self._send(self._buffer[:cut])
            self._buffer = self._buffer[cut:]

    def take_tail(self) -> str:
        self.flush()
        tail, self._buffer = self._buffer, ""
        return tail

    def flush_all(self) -> None:
        tail = self.take_tail()
        if tail:
            self._send(tail)

    def _send(self, text: str) -> None:
        conn = self._seat.conn
        if conn is not None:
            conn.send("O", text)

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise io.UnsupportedOperation("an attached client has no file descriptor")

    def writable(self) -> bool:
        return True


class _SeatInput:
    encoding = "utf-8"
    closed = False

    def __init__(self, seat: "Seat"):
        self._seat = seat

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise io.UnsupportedOperation("an attached client has no file descriptor")

    def readable(self) -> bool:
        return True

    def readline(self, *ignored) -> str:
        """The client's next line; ``""`` when it detached or its connection was lost (``seat.ended``)."""
        seat = self._seat
        conn = seat.conn
        tail = seat.stdout.take_tail()
        if len(tail) > PROMPT_LIMIT and conn is not None:
            conn.send("O", tail[:-PROMPT_LIMIT])
            tail = tail[-PROMPT_LIMIT:]
        if conn is None or not conn.send("P", tail):
            seat.ended = seat.ended or "drop"
            return ""
        while True:
            waiting = [conn.sock] + ([seat.listener.sock] if seat.listener.sock is not None else [])
            try:
                ready = select.select(waiting, [], [])[0]
            except InterruptedError:
                continue
            except (OSError, ValueError):
                ready = [conn.sock]
            if conn.sock not in ready:  # a newcomer only when the attached client has nothing to say
                if seat.listener.sock in ready:
                    seat.listener.accept_one(time.time() + HELD_HELLO_SECONDS, holder=conn)
                continue
            frame = conn.recv()
            if frame is None:
                seat.ended = "drop"
                return ""
            kind, text = frame
            if kind == "L":
                return text.replace("\n", " ") + "\n"
            if kind == "D":
                seat.ended = "detach"
                return ""


class Seat:
    """Who is attached: ``conn`` (an authenticated Connection or None), ``stdin``/``stdout`` for cmd."""

    def __init__(self, listener: Listener):
        self.listener = listener
        self.conn: Connection | None = None
        self.ended: str | None = None
        self.stdin = _SeatInput(self)
        self.stdout = _SeatOutput(self)
        self._watcher: threading.Thread | None = None
        self._wake: int | None = None

    def watch(self, interrupt: Callable[[], None]) -> None:
        """While the program runs, a thread reads the client: ``I`` (Ctrl-C) calls ``interrupt``, ``D``
        (Ctrl-D) detaches, the connection's end is noted; ``stop_watching`` ends it before the next stop."""
        conn = self.conn
        if conn is None or not conn.alive or self._watcher is not None:
            return
        wake_read, self._wake = os.pipe()

        def run() -> None:
            try:
                while True:
                    ready = select.select([conn.sock, wake_read], [], [])[0]
                    if wake_read in ready:
                        return
                    frame = conn.recv()
                    if frame is None:
                        return
                    if frame[0] == "I":
                        interrupt()
                    elif frame[0] == "D":
                        conn.close()
                        return
            except (OSError, ValueError):
                return
            finally:
                os.close(wake_read)

        self._watcher = threading.Thread(target=run, name="llmpdb-attached-client", daemon=True)
        self._watcher.start()

    def stop_watching(self) -> None:
        if self._watcher is None:
            return
        try:
            os.write(self._wake, b"x")
        except OSError:
            pass
        self._watcher.join(5)
        os.close(self._wake)
        self._watcher, self._wake = None, None

    def take(self, conn: Connection) -> None:
        """A new client sits down (first attach or re-attach)."""
        if self.conn is not None and self.conn is not conn:
            self.conn.close()
        self.conn = conn
        self.ended = None

    def still_there(self) -> bool:
        """True when a client sits here and has not detached (Ctrl-D) or gone while the program ran."""
        conn = self.conn
        if conn is None or not conn.alive:
            return False
        try:
            pending = bool(select.select([conn.sock], [], [], 0)[0])
        except (OSError, ValueError):
            pending = True
        if pending:  # nothing is typed while the program runs: this is a detach or the connection's end
            conn.recv(timeout=1)
            conn.close()
            self.conn = None
            return False
        return True

    def leave(self, kind: str, text: str = "") -> None:
        """Flush, send a last frame (``C`` continue, ``Q`` over) and, for ``Q``, close."""
        self.stdout.flush_all()
        if self.conn is not None:
            self.conn.send(kind, text)
            if kind == "Q":
                self.conn.close()
                self.conn = None
