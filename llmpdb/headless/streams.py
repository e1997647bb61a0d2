"""Which standard streams a stop can use: a closed or unreadable stdin, a closed stdout or stderr.

Usage::

    streams = stop_streams(sys.stdin, sys.stdout, sys.stderr)
    streams.input     # a stream to read commands from (an empty one when stdin cannot be read)
    streams.output    # stdout, else stderr when stdout is closed, else a sink that drops everything
    streams.note      # one line saying what is missing, or None
    out = DroppingOutput(sys.stdout)   # llmpdb's own output: a failed write (a full disk) is dropped

A process started with ``<&-``, ``>&-`` or ``2>&-`` has ``sys.stdin``/``sys.stdout``/``sys.stderr`` set to
``None``; ``nohup`` replaces a terminal stdin by a file opened for writing only, so every read raises
``EBADF``. Without this, ``input()`` raises (``lost sys.stdout``, ``Bad file descriptor``) and the
exception ends the program. With it, a stop writes to whatever stream is still open, reads the commands
it can, and otherwise sees end of input (the tour, then continue).

``DroppingOutput`` carries llmpdb's own output (a stop's text on a stdout that is not a terminal, the
``LLMPDB_LOG`` file): a write that fails (``>/dev/full``, a full disk, a reader gone) is dropped and said
once on standard error, and the program goes on. It writes to the descriptor itself (after flushing
what the program left in the stream's buffer), so no text of llmpdb's stays stuck in a buffer to fail
again when the program exits (which would turn its exit status into 120).
"""

from __future__ import annotations

import io
import os
import sys

__all__ = ["StopStreams", "stop_streams", "readable", "writable", "output_stream", "NULL_OUTPUT",
           "DroppingOutput"]

try:
    import fcntl
except ImportError:  # Windows: no access-mode check, a valid descriptor is taken as usable
    fcntl = None


class _NullOutput(io.TextIOBase):
    """A text stream that drops what it is given: where a stop writes when every output is closed."""

    def write(self, text: str) -> int:
        return len(text)

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False


NULL_OUTPUT = _NullOutput()
_NOTED: set[str] = set()


def _access_mode(stream) -> int | None:
    """The descriptor's access mode (``os.O_RDONLY``...), -1 when it is not open, None for a stream with
    no descriptor (``io.StringIO``: usable as it is)."""
    if getattr(stream, "closed", False):
        return -1
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None
    try:
        if fcntl is None:
            os.fstat(fd)
            return os.O_RDWR
        return fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE
    except OSError:
        return -1


def readable(stream) -> bool:
    """Usage: ``readable(sys.stdin)``; False for None, a closed stream or a descriptor open for writing only."""
    if stream is None:
        return False
    mode = _access_mode(stream)
    return mode is None or mode in (os.O_RDONLY, os.O_RDWR)


def writable(stream) -> bool:
    """Usage: ``writable(sys.stdout)``; False for None, a closed stream or a descriptor open for reading only."""
    if stream is None:
        return False
    mode = _access_mode(stream)
    return mode is None or mode in (os.O_WRONLY, os.O_RDWR)


def output_stream(stdout, stderr):
    """Usage: ``output_stream(sys.stdout, sys.stderr)``; the first of the two that can be written, else a
    sink that drops everything."""
    for stream in (stdout, stderr):
        if writable(stream):
            return stream
    return NULL_OUTPUT


class StopStreams:
    """What one stop reads from (``input``) and writes to (``output``), and the note saying why they are
    not the process's own (None when they are)."""

    __slots__ = ("input", "output", "note")

    def __init__(self, input: object, output: object, note: str | None):
        self.input, self.output, self.note = input, output, note


def stop_streams(stdin, stdout, stderr) -> StopStreams:
    """Usage: ``stop_streams(sys.stdin, sys.stdout, sys.stderr)``; what one stop reads from and writes to."""
    output = output_stream(stdout, stderr)
    missing = []
    if not readable(stdin):
        missing.append("standard input is closed or unreadable")
    if output is not stdout:
        missing.append("standard output is closed" + (", writing to standard error"
                                                      if output is stderr else ""))
    return StopStreams(stdin if readable(stdin) else io.StringIO(""), output,
                       "llmpdb: " + "; ".join(missing) if missing else None)


def stream_is_terminal(stream) -> bool:
    """Usage: ``stream_is_terminal(sys.stdin)``; False for None, a closed stream or anything but a tty."""
    try:
        return bool(stream is not None and stream.isatty())
    except (ValueError, OSError, AttributeError):
        return False


class DroppingOutput:
    """Usage: ``debugger.stdout = DroppingOutput(stream)``; writes that fail are dropped (see above)."""

    def __init__(self, stream, name: str = "standard output"):
        self.stream = stream
        self.name = name
        self.failed: str | None = None

    def _fd(self) -> int | None:
        try:
            return self.stream.fileno()
        except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
            return None

    def _dropped(self, exc: BaseException) -> None:
        why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        self.failed = why
        if self.name not in _NOTED:  # once per process for each output, however many streams wrap it
            _NOTED.add(self.name)
            stderr = sys.__stderr__ if sys.__stderr__ is not None else sys.stderr
            try:
                stderr.write(f"llmpdb: cannot write to {self.name} ({why}); llmpdb's output there is dropped\n")
                stderr.flush()
            except (OSError, ValueError, AttributeError):
                pass

    def write(self, text) -> int:
        text = str(text)
        try:
            fd = self._fd()
            if fd is None:
                self.stream.write(text)
                return len(text)
            try:
                self.stream.flush()  # the program's own text first, in order
            except (OSError, ValueError):
                pass
            data = text.encode(getattr(self.stream, "encoding", None) or "utf-8", "replace")
            while data:
                data = data[os.write(fd, data):]
        except (OSError, ValueError, AttributeError) as exc:
            self._dropped(exc)
        return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except (OSError, ValueError, AttributeError) as exc:
            self._dropped(exc)

    def close(self) -> None:
        try:
            self.stream.close()
        except (OSError, ValueError, AttributeError) as exc:
            self._dropped(exc)

    def writable(self) -> bool:
        return True

    def __getattr__(self, name):
        return getattr(self.stream, name)
