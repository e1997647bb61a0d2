"""``write_private_file(path, text)``: write a whole file at once, readable by its owner only.

Usage::

    try:
        write_private_file("llmpdb-crash-123.txt", report)
    except PrivateFileError as exc:
        print(f"llmpdb: {exc}", file=sys.stderr)      # one line: what PATH is and why it was not written

The text goes to a new temporary file next to ``path`` (created with ``O_EXCL | O_NOFOLLOW``, mode 0600),
is flushed to disk, then renamed over ``path``: a reader sees the old file or the whole new one, never a
half-written one. ``path`` itself is never followed: a symbolic link, a FIFO (opening one for writing
blocks until a reader comes), a directory or any other non-regular file at ``path`` is refused. An existing
regular file is replaced.
"""

from __future__ import annotations

import os
import stat

__all__ = ["write_private_file", "PrivateFileError"]

_KINDS = ((stat.S_ISLNK, "a symbolic link (not followed)"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))


class PrivateFileError(Exception):
    """The file could not be written; the message is one line naming the path and the reason."""


def _refusal(path: str) -> str | None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return exc.strerror or str(exc)
    for test, kind in _KINDS:
        if test(info.st_mode):
            return f"it is {kind}"
    return None if stat.S_ISREG(info.st_mode) else "it is not a regular file"


def write_private_file(path: str, text: str) -> str:
    """Usage: ``write_private_file(path, text)`` -> the absolute path written; raises ``PrivateFileError``."""
    path = os.path.abspath(path)
    reason = _refusal(path)
    if reason:
        raise PrivateFileError(f"cannot write {path}: {reason}")
    directory, name = os.path.split(path)
    temporary = os.path.join(directory, f".{name}.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(temporary, flags, 0o600)
    except OSError as exc:
        raise PrivateFileError(f"cannot write {path}: {exc.strerror or exc}") from None
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
