"""Remove a listener's socket and token files however the process that made them ends; never another's.

Usage (``llmpdb.headless.policy`` calls them)::

    remove_at_end(listener, close, seat)   # once open; close(): the orderly end (tell the client, remove files)
    with signals_remove_files():           # around a wait for a client
        conn = listener.wait_client(deadline)

- The program exits normally: ``close`` runs from ``atexit``.
- A forked ``multiprocessing`` child (a DataLoader worker) that opened its own listener at a stop: such a
  child ends with ``os._exit``, which skips ``atexit``; ``close`` is also one of multiprocessing's
  finalizers, which the child runs before ``os._exit``; and as it may be ended by SIGTERM
  (``Pool.terminate``, a DataLoader's shutdown), SIGTERM/SIGHUP remove its files for the rest of its life.
- ``SIGTERM`` or ``SIGHUP`` during a wait for a client, whose action is the default (the process would die
  without ``atexit``): the files are removed, the default action is put back and the signal raised again,
  so the process still dies by that signal (its parent sees -15 or -1). Only during the wait: a Python
  handler runs between bytecodes, and outside the wait the main thread may be inside C code (a hung
  collective) that a launcher's SIGTERM must still kill at once. A handler of the program's own is never
  replaced: it runs as before (``sys.exit`` in it ends through ``atexit``); an ignored signal stays
  ignored. Only the main thread can install handlers: a wait in another thread is not covered.
- ``os.fork()``: the child inherits the parent's listening socket and an attached client's connection; it
  closes them at once (``os.register_at_fork``), so workers hold neither the parent's port nor its
  client, and a signal or exit in the child never removes the parent's files (each file is tied to the
  pid that made it).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Callable

__all__ = ["remove_at_end", "signals_remove_files", "SIGNALS"]

SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))
_FILES: list[tuple[int, Path]] = []          # (pid that made it, path)
_HELD: list[tuple[int, object, object]] = []  # (pid, listener, seat): their sockets, closed in a forked child


def _remove_files(pid: int) -> None:
    for owner, path in list(_FILES):
        if owner == pid:
            try:
                os.unlink(path)
            except OSError:
                pass


def _on_signal(signum, frame) -> None:
    """SIGTERM/SIGHUP with the default action: remove this process's files, then die by the signal."""
    _remove_files(os.getpid())
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install() -> list[int]:
    installed = []
    if threading.current_thread() is threading.main_thread():
        for signum in SIGNALS:
            try:
                if signal.getsignal(signum) == signal.SIG_DFL:  # the program's own handler, or ignored: as it is
                    signal.signal(signum, _on_signal)
                    installed.append(signum)
            except (ValueError, OSError):
                continue
    return installed


@contextlib.contextmanager
def signals_remove_files():
    """Usage: ``with signals_remove_files(): conn = listener.wait_client(deadline)``; SIGTERM/SIGHUP with
    the default action remove this process's files while the block runs (see above)."""
    installed = _install()
    try:
        yield
    finally:
        for signum in installed:
            try:
                if signal.getsignal(signum) is _on_signal:
                    signal.signal(signum, signal.SIG_DFL)
            except (ValueError, OSError):
                pass


def _once(close: Callable[[], None]) -> Callable[[], None]:
    done: list[bool] = []

    def run() -> None:
        if not done:
            done.append(True)
            close()

    return run


def _in_forked_child() -> None:
    """``os.register_at_fork``: drop what the parent held, without a word to its client or its files."""
    me = os.getpid()
    for pid, listener, seat in list(_HELD):
        if pid == me:
            continue
        for sock in (getattr(listener, "sock", None), getattr(getattr(seat, "conn", None), "sock", None)):
            if sock is not None:
                try:
                    sock.close()
                except OSError:
                    pass
    _HELD[:] = [entry for entry in _HELD if entry[0] == me]


def remove_at_end(listener, close: Callable[[], None], seat=None) -> None:
    """Usage: ``remove_at_end(listener, close, seat)`` right after ``listener.open()`` (see above)."""
    pid = os.getpid()
    _FILES.extend((pid, Path(path)) for path in (listener.path, listener.token_path) if path is not None)
    _HELD.append((pid, listener, seat))
    close = _once(close)
    atexit.register(close)
    mp = sys.modules.get("multiprocessing")
    if mp is not None and mp.parent_process() is not None:  # a multiprocessing child: ends by os._exit,
        from multiprocessing import util                     # or by SIGTERM (Pool.terminate, DataLoader)

        util.Finalize(None, close, exitpriority=100)
        _install()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_in_forked_child)
