"""Where a rank's main thread is, as llmpdb sees it, without stopping it: for a job that hangs.

Usage::

    start_watcher(job, make_debugger)   # once per rank: a daemon thread answering dump requests
    text = dump_main_thread(make_debugger)          # `stack-model` and `shapes` of the main thread, as text
    answers = request_dumps(store, world=2)         # {rank: text or None}: what `python -m llmpdb ranks --job` prints

A Python signal handler runs only between bytecodes of the main thread, so it never runs while the main
thread waits in a collective (C code that released the GIL); a watcher thread can still read the main
thread's frames (``sys._current_frames()``). The watcher reads the store key ``dump/request`` every
``LLMPDB_DUMP_POLL`` seconds (default 0.5); for each new request it builds a debugger on a string buffer,
positions it at the main thread's innermost frame outside llmpdb and pdb (the breakpoint's frame for a
rank waiting at a stop), runs ``stack-model`` and ``shapes`` there and writes the text to
``dump/<request>/<rank>``. Nothing in the program is changed or stopped; no tensor data is read. At exit
the watcher is stopped and joined before the interpreter tears the store down.
"""

from __future__ import annotations

import atexit
import io
import math
import os
import sys
import threading
import time

__all__ = ["dump_main_thread", "start_watcher", "request_dumps", "DUMP_COMMANDS"]

DUMP_COMMANDS = ("stack-model", "shapes")
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the llmpdb package
_DEBUGGER_FILES = {"bdb.py", "pdb.py", "pdbpp.py", "cmd.py"}
_WATCHERS: dict[int, threading.Thread] = {}


def _is_debugger_frame(frame) -> bool:
    path = frame.f_code.co_filename
    return path.startswith(_HERE + os.sep) or os.path.basename(path) in _DEBUGGER_FILES


def _program_frame(frame):
    """The innermost frame that is the program's: past llmpdb's own waiting and pdb's dispatch."""
    inner = frame
    while inner is not None and _is_debugger_frame(inner):
        inner = inner.f_back
    return inner if inner is not None else frame


def dump_main_thread(make_debugger, commands=DUMP_COMMANDS) -> str:
    """Usage: ``dump_main_thread(lambda out: Pdb(stdout=out, ...))``; the main thread's stack and shapes."""
    frame = sys._current_frames().get(threading.main_thread().ident)
    if frame is None:
        return "no main thread frame (the program is ending)"
    frame = _program_frame(frame)
    out = io.StringIO()
    debugger = make_debugger(out)
    debugger.reset()
    debugger.stack, debugger.curindex = debugger.get_stack(frame, None)
    debugger.curframe = frame
    debugger.curframe_locals = frame.f_locals
    code = frame.f_code
    out.write(f"main thread at {code.co_filename}:{frame.f_lineno} ({code.co_name})\n")
    for command in commands:
        out.write(f"--- {command}\n")
        debugger.onecmd(command)
    return out.getvalue().rstrip("\n")


def _poll_seconds() -> float:
    """``LLMPDB_DUMP_POLL`` seconds, 0.05 to 3600 (inf, nan, abc: 0.5; Event.wait refuses inf)."""
    try:
        value = float(os.environ.get("LLMPDB_DUMP_POLL", "0.5"))
    except ValueError:
        return 0.5
    return min(3600.0, max(0.05, value)) if math.isfinite(value) else 0.5


def _watch(job, make_debugger, stop: threading.Event) -> None:
    answered = 0
    while not stop.wait(_poll_seconds()):
        try:
            wanted = int(job._get("dump/request") or 0)
            if wanted <= answered:
                continue
            try:
                text = dump_main_thread(make_debugger)
            except Exception as exc:  # never let the watcher die on one odd stack
                text = f"llmpdb: cannot read the main thread: {type(exc).__name__}: {exc}"
            job.store.set(f"dump/{wanted}/{job.rank}", text)
            answered = wanted
        except Exception:  # the store is gone: the job is ending
            return


def start_watcher(job, make_debugger) -> None:
    """Usage: ``start_watcher(job, factory)``; idempotent per rank; ``LLMPDB_DUMP_POLL=0`` disables it."""
    if os.environ.get("LLMPDB_DUMP_POLL") == "0" or job.rank in _WATCHERS:
        return
    stop = threading.Event()
    thread = threading.Thread(target=_watch, args=(job, make_debugger, stop), name="llmpdb-rank-watcher",
                              daemon=True)
    _WATCHERS[job.rank] = thread
    thread.start()
    atexit.register(_stop_watcher, thread, stop)


def _stop_watcher(thread: threading.Thread, stop: threading.Event) -> None:
    """At exit, before the interpreter tears the store down: a thread left inside a store call then would
    abort the process ("terminate called without an active exception")."""
    stop.set()
    thread.join(5)


def request_dumps(store, world: int, timeout: float = 10.0, poll: float = 0.1) -> dict[int, str | None]:
    """Usage: ``request_dumps(store, 2)``; ask every rank's watcher, wait up to ``timeout`` for the answers."""
    request = store.add("dump/request", 1)
    answers: dict[int, str | None] = dict.fromkeys(range(world))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(text is None for text in answers.values()):
        for rank in [r for r, text in answers.items() if text is None]:
            key = f"dump/{request}/{rank}"
            if store.check([key]):
                answers[rank] = store.get(key).decode("utf-8", "replace")
        time.sleep(poll)
    return answers
