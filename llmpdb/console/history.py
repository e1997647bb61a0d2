"""The prompt's history file: where it lives, how much is kept, opened so that no file planted there can hurt.

Usage::

    history = open_history()     # a prompt_toolkit History: on disk when the state file is safe, else in memory
    history_path()               # ~/.local/state/llmpdb/history ($XDG_STATE_HOME/llmpdb/history when set)
    history_size()               # $LLMPDB_HISTORY_SIZE, else the config file's history_size, else 1000

The folder is created 0700 and the file 0600. The file is used only when it is safe: the folder is a
directory owned by this user and not writable by group or others, and the file is a regular file of this
user opened by ``files.private_file.open_private`` (a symbolic link planted there is refused; a FIFO,
device or directory there is refused and never blocks the prompt). A refused file keeps
this session's history in memory and says so once, on standard error. Only the tail of the file that holds
the last ``history_size()`` entries is read (a 200 MB file costs a few chunks), invalid UTF-8 is read with
replacement characters, and a file holding more entries than kept is rewritten to the kept ones.
``LLMPDB_HISTORY_SIZE=0`` keeps no history on disk (nor reads it).
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from ..files.private_file import open_private, write_private_file

__all__ = ["history_path", "history_size", "open_history", "read_tail", "DEFAULT_HISTORY_SIZE"]

DEFAULT_HISTORY_SIZE = 1000
_CHUNK = 1 << 16
_MAX_READ = 1 << 24  # bytes of tail read at most, whatever the entries' length
_WARNED: list[str] = []
_CHECKED: dict[Path, bool] = {}  # paths found safe in this process (each read and write re-checks the file)


def history_path() -> Path:
    """Usage: ``history_path()`` -> ``~/.local/state/llmpdb/history`` (``$XDG_STATE_HOME`` when set)."""
    state = os.environ.get("XDG_STATE_HOME", "").strip()
    base = Path(state) if state and os.path.isabs(state) else Path.home() / ".local" / "state"
    return base / "llmpdb" / "history"


def history_size() -> int:
    """Usage: ``history_size()`` -> entries kept: ``$LLMPDB_HISTORY_SIZE``, else the config file's
    ``history_size``, else 1000."""
    text = os.environ.get("LLMPDB_HISTORY_SIZE", "").strip()
    if text.isascii() and text.isdigit():
        return min(int(text), 10**6) if len(text) <= 7 else 10**6  # ASCII digits only: "²" is a digit to isdigit
    from ..render.config_file import config
    return config().history_size


def _refuse(path: Path, why: str) -> None:
    if not _WARNED:
        _WARNED.append(why)
        print(f"*** history: {path} {why}; this session's history stays in memory", file=sys.stderr)


def _safe_folder(folder: Path) -> str | None:
    """Why ``folder`` may not hold the history (None when it may), creating it 0700 when missing."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.stat(folder)
    except OSError as error:
        return f"cannot be created ({error.strerror})"
    if not stat.S_ISDIR(info.st_mode):
        return "is not in a directory"
    if info.st_uid != os.geteuid():
        return "is in a folder owned by another user"
    if info.st_mode & 0o022:
        return "is in a folder writable by group or others"
    return None


def read_tail(fd: int, keep: int) -> tuple[list[str], bool]:
    """Usage: ``entries, more = read_tail(fd, 1000)``; the last ``keep`` entries newest first, and whether
    the file holds more (entries are ``#`` lines followed by ``+``-prefixed lines, prompt_toolkit's format)."""
    end = os.fstat(fd).st_size
    start, data = end, b""
    while start > 0 and end - start < _MAX_READ and data.count(b"\n#") <= keep:
        start = max(0, start - _CHUNK)
        data = os.pread(fd, end - start, start)
    if start > 0:  # a partial first entry: drop up to the first separator line
        cut = data.find(b"\n#")
        data = data[cut + 1:] if cut >= 0 else b""
    strings: list[str] = []
    lines: list[str] = []
    for line_bytes in data.splitlines(keepends=True):
        line = line_bytes.decode("utf-8", errors="replace")
        if line.startswith("+"):
            lines.append(line[1:])
        else:
            if lines:
                strings.append("".join(lines)[:-1])
            lines = []
    if lines:
        strings.append("".join(lines)[:-1])
    more = start > 0 or len(strings) > keep
    return list(reversed(strings))[:keep], more


def _rewrite(path: Path, newest_first: list[str]) -> None:
    write_private_file(str(path), "".join("\n# llmpdb\n" + "".join(f"+{line}\n" for line in entry.split("\n"))
                                          for entry in reversed(newest_first)))


def check_history() -> bool:
    """Usage: ``check_history()`` -> whether the history may live on disk (creating the file 0600); where
    it may not, says why once on stderr (the first prompt's warning comes before that prompt is drawn)."""
    path = history_path()
    if _CHECKED.get(path):  # the first prompt checked it; the editor's open_history asks again at once
        return True
    why = _safe_folder(path.parent)
    if why is None:
        try:
            os.close(open_private(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND))
        except OSError:
            why = "is not a regular file of ours"
    if why is not None:
        _refuse(path, why)
        return False
    _CHECKED[path] = True
    return True


def open_history():
    """Usage: ``PromptSession(history=open_history())``; on disk when safe, else in memory (see above)."""
    from prompt_toolkit.history import History, InMemoryHistory

    keep = history_size()
    path = history_path()
    if keep <= 0 or not check_history():
        return InMemoryHistory()

    class _StateHistory(History):
        def load_history_strings(self):
            try:
                fd = open_private(path, os.O_RDONLY)
            except OSError:
                return []
            try:
                entries, more = read_tail(fd, history_size())
            finally:
                os.close(fd)
            if more:
                try:
                    _rewrite(path, entries)
                except OSError:
                    pass
            return entries

        def store_string(self, string: str) -> None:
            text = "\n# llmpdb\n" + "".join(f"+{line}\n" for line in string.split("\n"))
            try:
                fd = open_private(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            except OSError:  # replaced by something unsafe meanwhile: the entry stays in memory
                return
            try:
                os.write(fd, text.encode("utf-8", errors="replace"))
            except OSError:  # a full or read-only disk: the entry stays in this session's memory
                pass
            finally:
                os.close(fd)

    return _StateHistory()
