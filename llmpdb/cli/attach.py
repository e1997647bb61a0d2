"""``python -m llmpdb attach [TARGET] [--token-file FILE]``: the prompt of a stop that waits for a client.

Usage::

    python -m llmpdb attach                                   # list this user's attachable jobs
    python -m llmpdb attach /run/user/1000/llmpdb/job-4242.sock
    python -m llmpdb attach 4242                              # the socket of pid 4242 in the per-user dir
    python -m llmpdb attach tcp:127.0.0.1:5678 --token-file /tmp/llmpdb-1000/job-4242.token

The job's log line names the exact command. On a terminal the prompt is llmpdb's console
(``llmpdb.console.prompt``: prompt_toolkit, the history of the local prompt, TAB completion of command names);
where it cannot run, readline with its history in ``~/.llmpdb_attach_history`` (read and written through
``files.private_file``: a symbolic link or a FIFO there is refused in one line). Colours come from the
server when this terminal has them. Ctrl-D detaches: the stop continues the program. After ``c`` the
client stays attached and gets the program's next stop; while it runs, Ctrl-C stops it at its next line
(as at a local prompt) and Ctrl-D detaches. Ctrl-C at the prompt clears the line. Exit status: 0 after a
detach or the program's end, 1 when refused or unreachable, 2 for usage.
"""

from __future__ import annotations

import getpass
import json
import os
import select
import shutil
import sys
from pathlib import Path

from ..console.completion import CompletionContext
from ..console.prompt import terminal_console
from ..files.private_file import PrivateFileError, read_bounded, write_private_file
from ..remote.frames import MAX_FRAME
from ..remote.listener import RemoteError, connect, parse_target, socket_dir

__all__ = ["main"]

USAGE = "usage: python -m llmpdb attach [TARGET] [--token-file FILE]"
HISTORY = Path.home() / ".llmpdb_attach_history"
HISTORY_SIZE = 1000
HISTORY_FILE_LIMIT = 1 << 20  # bytes of ~/.llmpdb_attach_history read at most
TOKEN_FILE_LIMIT = 4096  # a token file holds the token and the target: two short lines
_HISTORY_SAID: list[bool] = []


def attachable() -> list[tuple[Path, int, str]]:
    """Usage: ``attachable()`` -> ``[(socket path, pid, command line), ...]`` for this user's live jobs."""
    try:
        directory = socket_dir()
    except RemoteError:
        return []
    found = []
    for path in sorted(directory.glob("job-*.sock")) + sorted(directory.glob("job-*.token")):
        pid_text = path.stem.split("-")[1] if path.stem.count("-") >= 1 else ""
        if not pid_text.isdigit():
            continue
        pid = int(pid_text)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        except PermissionError:
            pass
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
            cmdline = " ".join(part.decode("utf-8", "replace") for part in raw.split(b"\0") if part)
        except OSError:
            cmdline = "?"
        found.append((path, pid, cmdline))
    return found


def _line_editor(commands: list[str]):
    """The terminal console (``llmpdb.console.prompt``: history in the state directory, command-name completion),
    else readline where the console cannot run (``LLMPDB_PROMPT=plain``, ``TERM=dumb``, no terminal)."""
    console = terminal_console()
    if console is None:
        return _readline(commands)
    context = CompletionContext(commands={name: "" for name in commands}, expressions=False)
    return _ConsoleEditor(console, lambda: context)


class _ConsoleEditor:
    def __init__(self, console, context):
        self.console, self.context = console, context

    def read(self, prompt: str) -> str:
        return self.console.read(prompt, self.context)


def _readline(commands: list[str]):
    try:
        import readline
    except ImportError:
        return None
    _load_history(readline)

    def complete(text, state):
        if readline.get_line_buffer()[:readline.get_begidx()].strip():
            return None
        matches = [c for c in commands if c.startswith(text)]
        return matches[state] if state < len(matches) else None

    readline.set_completer(complete)
    readline.set_completer_delims(" \t\n;")
    readline.parse_and_bind("tab: complete")
    return readline


def _resolve(target: str) -> str:
    if target.isdigit():
        for path, pid, _cmd in attachable():
            if pid == int(target) and path.suffix == ".sock":
                return str(path)
        raise RemoteError(f"no attachable socket for pid {target} in {socket_dir()}")
    return target


def _token_lines(path: Path) -> list[str]:
    """The lines of a token file: a bounded read of a regular file (``files.private_file.read_bounded``),
    RemoteError (one line) for a FIFO, a device, a directory, a huge file or text that is not UTF-8."""
    try:
        data = read_bounded(path, TOKEN_FILE_LIMIT)
    except PrivateFileError as exc:
        raise RemoteError(f"the token file: {exc}") from None
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        raise RemoteError(f"the token file {path} is not UTF-8 text") from None


def _canonical(target: str) -> str:
    """``127.0.0.1:5678`` -> ``tcp:127.0.0.1:5678``, as the job's token file names it; other targets as given."""
    kind, address = parse_target(target)
    return f"tcp:{address[0]}:{address[1]}" if kind == "tcp" else target


def _token(target: str, token_file: str | None) -> str | None:
    if parse_target(target)[0] != "tcp":
        return None
    candidates = [Path(token_file)] if token_file else [p for p, _, _ in attachable() if p.suffix == ".token"]
    for path in candidates:
        try:
            lines = _token_lines(path)
        except RemoteError:
            if token_file:
                raise
            continue
        if token_file or (len(lines) > 1 and lines[1].strip() == target):
            return lines[0].strip() if lines else ""
    return None


def _list() -> int:
    jobs = attachable()
    if not jobs:
        print(f"no attachable jobs of {getpass.getuser()} in {socket_dir()}")
        return 0
    for path, pid, cmdline in jobs:
        target = str(path)
        if path.suffix == ".token":
            try:
                lines = _token_lines(path)
            except RemoteError as exc:
                print(f"pid {pid:<8} {cmdline[:60]:<60}  unusable: {exc}")
                continue
            target = f"{lines[1]} --token-file {path}" if len(lines) > 1 else str(path)
        print(f"pid {pid:<8} {cmdline[:60]:<60}  python -m llmpdb attach {target}")
    return 0


def _session(sock, hello: dict) -> int:
    from ..remote.listener import Connection

    conn = Connection(sock)
    conn.send("H", json.dumps(hello))
    state = {"readline": None, "running": False}
    while True:
        try:
            status = _step(conn, state)
        except KeyboardInterrupt:
            if not state["running"]:
                raise
            print("\nllmpdb: interrupting the program; it stops at its next line")
            conn.send("I")
            continue
        if status is not None:
            return status


def _step(conn, state: dict) -> int | None:
    """One frame from the server (after waiting while the program runs); an exit status when done."""
    if state["running"] and not _wait_while_running(conn):
        conn.send("D")
        print("\nllmpdb: detached; the program continues")
        return 0
    frame = conn.recv()
    if frame is None:
        print("\nllmpdb: the connection closed")
        return 0
    kind, text = frame
    state["running"] = kind == "C"
    if kind == "W":
        try:
            info = json.loads(text or "{}")
        except (ValueError, RecursionError):
            info = {}
        info = info if isinstance(info, dict) else {}  # whoever answers on that address: data, checked
        commands = info.get("commands")
        commands = [c for c in commands if isinstance(c, str)] if isinstance(commands, list) else []
        if state["readline"] is None:
            state["readline"] = _line_editor(commands)
            print(f"llmpdb: attached to pid {info.get('pid')}, stopped at {info.get('where', '?')}")
        else:
            print(f"llmpdb: the program stopped at {info.get('where', '?')}")
    elif kind == "O":
        sys.stdout.write(text)
        sys.stdout.flush()
    elif kind == "P":
        line = _ask(text, state["readline"])
        while line is not None and len(line.encode("utf-8", "replace")) > MAX_FRAME:  # the job would drop us
            print(f"llmpdb attach: a line over {MAX_FRAME} bytes is not sent; type a shorter one")
            line = _ask(text, state["readline"])
        if line is None:
            conn.send("D")
            conn.recv(timeout=5)
            print("\nllmpdb: detached; the program continues")
            return 0
        conn.send("L", line)
        _save_history(state["readline"])
    elif kind == "C":
        print(text)
    elif kind in ("Q", "E"):
        print(text, file=sys.stderr if kind == "E" else sys.stdout)
        return 1 if kind == "E" else 0
    return None


def _history_refused(exc: Exception) -> None:
    if not _HISTORY_SAID:
        _HISTORY_SAID.append(True)
        print(f"llmpdb attach: history: {exc}; this session's history is not kept", file=sys.stderr)


def _load_history(readline) -> None:
    """The readline history: a bounded read of a regular file (a link, a FIFO, a huge file are refused)."""
    try:
        data = read_bounded(HISTORY, HISTORY_FILE_LIMIT)
    except PrivateFileError as exc:
        if os.path.lexists(HISTORY):
            _history_refused(exc)
        return
    for line in data.decode("utf-8", "replace").splitlines()[-HISTORY_SIZE:]:
        if line:
            readline.add_history(line)


def _save_history(readline) -> None:
    """Rewrite the history file through ``write_private_file`` (0600, never through a link), not readline's
    ``write_history_file`` (which writes wherever a symbolic link planted there points)."""
    if readline is None or isinstance(readline, _ConsoleEditor) or _HISTORY_SAID:  # the console saves its own
        return
    try:
        count = readline.get_current_history_length()
        lines = [readline.get_history_item(i) for i in range(max(1, count - HISTORY_SIZE + 1), count + 1)]
        write_private_file(str(HISTORY), "".join(f"{line}\n" for line in lines if line))
    except (PrivateFileError, ValueError) as exc:
        _history_refused(exc)


def _ask(prompt: str, editor=None) -> str | None:
    read = editor.read if isinstance(editor, _ConsoleEditor) else input
    while True:
        try:
            return read(prompt)
        except EOFError:
            return None
        except KeyboardInterrupt:
            print()


def _wait_while_running(conn) -> bool:
    """While the program runs: True when the server speaks (the next stop), False after Ctrl-D (Ctrl-C is
    the caller's: it asks the program to stop at its next line, as at a local prompt)."""
    watched = [conn.sock] + ([sys.stdin] if sys.stdin is not None and sys.stdin.isatty() else [])
    while True:
        ready = select.select(watched, [], [])[0]
        if conn.sock in ready:
            return True
        if not sys.stdin.readline():
            return False
        print("llmpdb: the program is running; Ctrl-C stops it, Ctrl-D detaches")


def main(argv: list[str]) -> int:
    """Usage: ``main(["tcp:127.0.0.1:5678", "--token-file", "F"])``; the exit status."""
    target, token_file, rest = None, None, list(argv)
    while rest:
        word = rest.pop(0)
        if word in ("-h", "--help"):
            print(USAGE + "\n" + (__doc__ or "").split("\n\n", 1)[1])
            return 0
        if word == "--token-file" and rest:
            token_file = rest.pop(0)
        elif word.startswith("--token-file="):
            token_file = word.split("=", 1)[1]
        elif target is None and not word.startswith("-"):
            target = word
        else:
            print(f"llmpdb attach: unexpected argument {word!r}\n{USAGE}", file=sys.stderr)
            return 2
    try:
        if target is None:
            return _list()
        target = _canonical(_resolve(target))
        token = _token(target, token_file)
        if parse_target(target)[0] == "tcp" and token is None:
            raise RemoteError(f"{target} needs its token: --token-file FILE (the job's log line names it)")
        sock = connect(target)
    except RemoteError as exc:
        print(f"llmpdb attach: {exc}", file=sys.stderr)
        return 1
    color = sys.stdout.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    hello = {"token": token, "color": bool(color), "columns": shutil.get_terminal_size((100, 24)).columns,
             "who": f"{getpass.getuser()}@{os.uname().nodename} pid {os.getpid()}"}
    try:
        return _session(sock, hello)
    except KeyboardInterrupt:
        print("\nllmpdb: interrupted; the connection closed")
        return 0
    finally:
        sock.close()
