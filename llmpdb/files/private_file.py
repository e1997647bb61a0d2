"""The one hardened opener for every file llmpdb writes, appends or reads back from outside.

Usage::

    fd = open_private("job.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT)   # a descriptor, or PrivateFileError
    log = append_private("job.log")            # the same, as a text stream appended to (LLMPDB_LOG)
    write_private_file("llmpdb-crash-123.txt", report)      # a whole file at once (tmp + rename)
    data = read_bounded("job-4242.token", 4096)             # at most 4096 bytes of a regular file
    try:
        data = read_bounded(path, 4096)
    except PrivateFileError as exc:                          # an OSError; the message is one line
        print(f"llmpdb: {exc}", file=sys.stderr)

``open_private`` never follows a symbolic link (``O_NOFOLLOW``) and never blocks on a FIFO (``O_NONBLOCK``,
then ``fstat``): anything but a regular file is refused (a link, a FIFO, a directory, a socket, a device
such as ``/dev/full`` or ``/dev/zero``). Opened for writing, the file must belong to this user and have
no other name (a hard link); an existing file with a wider mode is made 0600, a new one is created 0600.
``write_private_file`` writes a new temporary file beside ``path`` through it, flushes it to disk and
renames it over ``path``: a reader sees the old file or the whole new one, never half of one.
``read_bounded`` refuses a file larger than its limit instead of reading it.
"""

from __future__ import annotations

import os
import stat

__all__ = ["open_private", "append_private", "read_bounded", "write_private_file", "PrivateFileError"]

_SAFE = getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_WRITING = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_KINDS = ((stat.S_ISLNK, "a symbolic link (not followed)"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))


class PrivateFileError(OSError):
    """The file could not be opened, written or read; the message is one line naming the path and why."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "cannot use the file"


def _kind(mode: int) -> str | None:
    """Why a file of this mode is refused; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((f"it is {what}" for test, what in _KINDS if test(mode)), "it is not a regular file")


def _refusal(path) -> str | None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return exc.strerror or str(exc)
    return _kind(info.st_mode)


def open_private(path, flags: int, mode: int = 0o600) -> int:
    """Usage: ``fd = open_private(path, os.O_RDONLY)``; a blocking descriptor on a regular file (see above);
    ``PrivateFileError`` (one line) otherwise."""
    shown = os.fsdecode(path)
    try:
        fd = os.open(path, flags | _SAFE, mode)
    except OSError as exc:  # ELOOP for a link, ENXIO for a FIFO without a reader, EISDIR...: say what it is
        raise PrivateFileError(f"cannot open {shown}: {_refusal(path) or exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        why = _kind(info.st_mode)
        if why is None and flags & _WRITING:
            if info.st_uid != os.geteuid():
                why = f"it belongs to uid {info.st_uid}, not to you (uid {os.geteuid()})"
            elif info.st_nlink > 1:
                why = f"it has {info.st_nlink} names (hard links)"
            elif stat.S_IMODE(info.st_mode) & ~0o600:
                os.fchmod(fd, 0o600)
        if why is not None:
            raise PrivateFileError(f"cannot open {shown}: {why}")
        os.set_blocking(fd, True)
    except BaseException as exc:
        os.close(fd)
        if isinstance(exc, OSError) and not isinstance(exc, PrivateFileError):
            raise PrivateFileError(f"cannot open {shown}: {exc.strerror or exc}") from None
        raise
    return fd


def append_private(path):
    """Usage: ``log = append_private("job.log")``; a text stream appending to ``path`` (created 0600)."""
    fd = open_private(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    return os.fdopen(fd, "a", encoding="utf-8", errors="replace")


def read_bounded(path, limit: int) -> bytes:
    """Usage: ``data = read_bounded(path, 4096)``; the whole file, refused (``PrivateFileError``) when it is
    not a regular file or holds more than ``limit`` bytes."""
    fd = open_private(path, os.O_RDONLY)
    try:
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise PrivateFileError(f"cannot read {os.fsdecode(path)}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if size > limit:
        raise PrivateFileError(f"cannot read {os.fsdecode(path)}: it holds more than {limit} bytes")
    return b"".join(chunks)


def write_private_file(path: str, text: str) -> str:
    """Usage: ``write_private_file(path, text)`` -> the absolute path written; raises ``PrivateFileError``."""
    path = os.path.abspath(path)
    reason = _refusal(path)
    if reason:
        raise PrivateFileError(f"cannot write {path}: {reason}")
    directory, name = os.path.split(path)
    temporary = os.path.join(directory, f".{name}.{os.getpid()}.tmp")
    try:
        fd = open_private(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except PrivateFileError as exc:
        raise PrivateFileError(f"cannot write {path}: {str(exc).rsplit(': ', 1)[-1]}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)  # rename() replaces the name at path: a link put there meanwhile is not followed
    except OSError as exc:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise PrivateFileError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path
