"""Where a rank's main thread is, as llmpdb sees it, without stopping it: for a job that hangs.

Usage::

    start_watcher(job, make_debugger)   # once per rank: a daemon thread answering dump requests
    text = dump_main_thread(make_debugger)          # `stack-model` and `shapes` of the main thread, as text
    answers = request_dumps(store, world=2)         # {rank: text or None}: what `python -m llmpdb ranks --job` prints
    answers = request_dumps(wire, 4, reconnect=make_wire)   # over ``WireStore``: one wait for every answer

A Python signal handler runs only between bytecodes of the main thread, so it never runs while the main
thread waits in a collective (C code that released the GIL); a watcher thread can still read the main
thread's frames (``sys._current_frames()``). Under torchrun the watcher holds a connection of its own to
the agent's store (``llmpdb.ranks.wire``, plain sockets: blocked in ``recv`` it holds no GIL) and waits
there for the key ``dump/go/<request>``, which ``request_dumps`` sets after numbering its request
(``dump/request``): every rank starts its answer at once, and the asker waits for all the answers in one
request (``bench/ranks_job_bench.py``). Elsewhere (a store llmpdb cannot reach by address) it reads
``dump/request`` every ``LLMPDB_DUMP_POLL`` seconds (default 0.5). For each new request it builds a debugger on a string buffer,
positions it at the main thread's innermost frame outside llmpdb and pdb (the breakpoint's frame for a
rank waiting at a stop), runs ``stack-model`` and ``shapes`` there and writes the text to
``dump/<request>/<rank>``. Nothing in the program is changed or stopped; no tensor data is read. At exit
the watcher is stopped (its connection closed under it) and joined before the interpreter tears the store
down.
"""

from __future__ import annotations

import atexit
import io
import math
import os
import sys
import threading
import time

from .store import torchrun_prefix
from .wire import WireStore

__all__ = ["dump_main_thread", "start_watcher", "request_dumps", "DUMP_COMMANDS"]

DUMP_COMMANDS = ("stack-model", "shapes")
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the llmpdb package
_DEBUGGER_FILES = {"bdb.py", "pdb.py", "pdbpp.py", "cmd.py"}
_CONSOLE_PACKAGES = {"prompt_toolkit", "pyrepl", "_pyrepl", "fancycompleter"}
_STDLIB = os.path.dirname(os.__file__)
_WATCHERS: dict[int, threading.Thread] = {}


def _is_debugger_frame(frame) -> bool:
    path = frame.f_code.co_filename
    return path.startswith(_HERE + os.sep) or os.path.basename(path) in _DEBUGGER_FILES


def _is_console_frame(frame) -> bool:
    """A frame of the prompting rank's line editor: prompt_toolkit, pdb++'s pyrepl (``unix_console.py``),
    or the standard library they run on (asyncio, selectors, threading)."""
    path = frame.f_code.co_filename
    parts = set(path.split(os.sep))
    if parts & _CONSOLE_PACKAGES:
        return True
    return path.startswith(_STDLIB + os.sep) and "site-packages" not in parts


def _program_frame(frame):
    """The innermost frame that is the program's: past the line editor of an open prompt (read from the
    innermost debugger frame out), llmpdb's own waiting and pdb's dispatch."""
    inner, editor = frame, frame
    while editor is not None and not _is_debugger_frame(editor) and _is_console_frame(editor):
        editor = editor.f_back
    if editor is not None and editor is not frame and _is_debugger_frame(editor):
        inner = editor  # a prompt is open: its editor's frames are not the program's
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


def _answer(job, make_debugger, numbers, put) -> None:
    try:
        text = dump_main_thread(make_debugger)
    except Exception as exc:  # never let the watcher die on one odd stack
        text = f"llmpdb: cannot read the main thread: {type(exc).__name__}: {exc}"
    for number in numbers:
        put(f"dump/{number}/{job.rank}", text)


def _watch(job, make_debugger, stop: threading.Event) -> None:
    answered = 0
    while not stop.wait(_poll_seconds()):
        try:
            wanted = int(job._get("dump/request") or 0)
            if wanted <= answered:
                continue
            _answer(job, make_debugger, [wanted], job.store.set)
            answered = wanted
        except Exception:  # the store is gone: the job is ending
            return


def _wire_for(job):
    """A connection of the watcher's own to torchrun's store, or None (not under torchrun: poll instead)."""
    host, port = os.environ.get("MASTER_ADDR", ""), os.environ.get("MASTER_PORT", "")
    if not job.via.startswith("torchrun") or not host or not port.isdigit():
        return None
    try:
        return WireStore(host, int(port), prefix=torchrun_prefix(), timeout=10)
    except OSError:
        return None


def _watch_wire(job, make_debugger, stop: threading.Event, wire) -> None:
    """Block on ``dump/go/<next request>``; ``_stop_watcher`` closes ``wire`` to end the wait."""
    try:
        answered = wire.add("dump/request", 0)
        wire.settimeout(None)
        while not stop.is_set():
            wire.wait([f"dump/go/{answered + 1}"])
            if stop.is_set():
                return
            latest = max(answered + 1, wire.add("dump/request", 0))
            _answer(job, make_debugger, range(answered + 1, latest + 1), wire.set)
            answered = latest
    except Exception:  # closed at exit, or the store is gone: the job is ending
        return


def start_watcher(job, make_debugger):
    """Usage: ``stop = start_watcher(job, factory)``; idempotent per rank; ``LLMPDB_DUMP_POLL=0`` disables it.
    Returns what stops and joins it (also registered with ``atexit``), or None when it was not started."""
    if os.environ.get("LLMPDB_DUMP_POLL") == "0" or job.rank in _WATCHERS:
        return None
    stop = threading.Event()
    wire = _wire_for(job)
    target, args = (_watch_wire, (job, make_debugger, stop, wire)) if wire is not None else \
        (_watch, (job, make_debugger, stop))
    thread = threading.Thread(target=target, args=args, name="llmpdb-rank-watcher", daemon=True)
    _WATCHERS[job.rank] = thread
    thread.start()
    atexit.register(_stop_watcher, thread, stop, wire)
    return lambda: (_WATCHERS.pop(job.rank, None), _stop_watcher(thread, stop, wire))


def _stop_watcher(thread: threading.Thread, stop: threading.Event, wire=None) -> None:
    """At exit, before the interpreter tears the store down: a thread left inside a store call then would
    abort the process ("terminate called without an active exception"); a wire wait ends when it is closed."""
    stop.set()
    if wire is not None:
        wire.close()
    thread.join(5)


def request_dumps(store, world: int, timeout: float = 10.0, poll: float = 0.02,
                  reconnect=None) -> dict[int, str | None]:
    """Usage: ``request_dumps(store, 2)``; ask every rank's watcher, wait up to ``timeout`` for the answers.

    A ``WireStore`` waits for every answer in one request; when some rank does not answer in time, that
    connection is spent, and ``reconnect()`` gives a fresh one to collect the answers that did come."""
    request = store.add("dump/request", 1)
    store.set(f"dump/go/{request}", "")  # wakes the watchers blocked on it (``_watch_wire``)
    keys = [f"dump/{request}/{rank}" for rank in range(world)]
    answers: dict[int, str | None] = dict.fromkeys(range(world))
    if hasattr(store, "multi_get") and hasattr(store, "settimeout"):  # the wire: no polling
        try:
            store.settimeout(timeout)
            store.wait(keys)
            return {rank: value.decode("utf-8", "replace") for rank, value in enumerate(store.multi_get(keys))}
        except OSError:
            if reconnect is None:
                return answers
            store = reconnect()
        timeout = 0.0  # what came in time, read once below
    deadline = time.monotonic() + timeout
    while True:
        for rank in [r for r, text in answers.items() if text is None]:
            if store.check([keys[rank]]):
                answers[rank] = store.get(keys[rank]).decode("utf-8", "replace")
        if time.monotonic() >= deadline or all(text is not None for text in answers.values()):
            return answers
        time.sleep(poll)
