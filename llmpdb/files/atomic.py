"""Write a file atomically with mode 0600, refusing a symlink, FIFO, folder or device at the target.

Usage::

    check_target("out.safetensors")                  # FileTargetError (one line) for a bad target
    with atomic_writer("out.safetensors") as fh:     # a temporary file beside it, renamed over it at the end
        fh.write(b"...")

The target is looked at with ``lstat`` (a symbolic link is never followed: it is refused); the temporary
file is created by ``private_file.open_private`` (``O_CREAT | O_EXCL | O_NOFOLLOW``, mode 0600), flushed
and fsynced, then ``os.replace``d onto the target, so a reader never sees half a file. On any failure it
is removed.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from typing import BinaryIO

from .private_file import PrivateFileError, open_private

__all__ = ["FileTargetError", "check_target", "atomic_writer"]

_KINDS = ((stat.S_ISLNK, "a symbolic link (never followed)"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


class FileTargetError(ValueError):
    """A path that must not be written: the message is one line."""


def check_target(path: str) -> None:
    """Usage: ``check_target(p)``; None when ``p`` is absent or a regular file; else ``FileTargetError``."""
    if not path or "\x00" in path:
        raise FileTargetError(f"{path!r}: not a usable file name")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise FileTargetError(f"{path}: refused: the folder {folder} does not exist") from None
        return
    except OSError as exc:
        raise FileTargetError(f"{path}: cannot look at it: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = next((what for test, what in _KINDS if test(st.st_mode)), "not a regular file")
        raise FileTargetError(f"{path}: refused: it is {kind}, not a regular file")


@contextlib.contextmanager
def atomic_writer(path: str) -> Iterator[BinaryIO]:
    """Usage: ``with atomic_writer(p) as fh: fh.write(data)``; ``p`` appears (mode 0600) only when done."""
    check_target(path)
    folder = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    for attempt in range(100):
        tmp = os.path.join(folder, f".{base}.tmp-{os.getpid()}-{attempt}")
        if os.path.lexists(tmp):
            continue
        try:
            fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            break
        except PrivateFileError:
            continue
    else:
        raise FileTargetError(f"{path}: cannot create a temporary file in {folder}")
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o600)
        check_target(path)  # swapped for a link or a pipe while we wrote: refuse rather than replace it
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
