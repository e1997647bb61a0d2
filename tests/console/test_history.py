"""The history file is opened safely: links, FIFOs, foreign or open folders refused, huge files read by the tail."""

from __future__ import annotations

import os
import stat
import time

import pytest

from llmpdb.console import history as console_history
from llmpdb.console.history import history_path, open_history, read_tail


@pytest.fixture
def state(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.setenv("LLMPDB_HISTORY_SIZE", "5")
    monkeypatch.setattr(console_history, "_WARNED", [])
    return tmp_path / "llmpdb"


def _entries(history) -> list[str]:
    return list(history.load_history_strings())


def _on_disk(history) -> bool:
    return type(history).__name__ != "InMemoryHistory"


def test_round_trip_and_modes(state):
    history = open_history()
    assert _on_disk(history)
    history.store_string("p 1")
    history.store_string("for i in x:\n    p i")
    assert _entries(open_history()) == ["for i in x:\n    p i", "p 1"]
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(state / "history").st_mode) == 0o600


def test_symlink_is_refused_and_its_target_untouched(state, tmp_path, capsys):
    state.mkdir(mode=0o700)
    target = tmp_path / "secret"
    target.write_text("keep me\n")
    os.symlink(target, state / "history")
    history = open_history()
    assert not _on_disk(history)
    history.store_string("p 1")
    assert target.read_text() == "keep me\n"
    open_history()
    assert capsys.readouterr().err.count("*** history:") == 1  # said once per process


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_fifo_or_directory_is_refused_without_blocking(state, kind):
    state.mkdir(mode=0o700)
    path = state / "history"
    os.mkfifo(path) if kind == "fifo" else path.mkdir()
    began = time.monotonic()
    assert not _on_disk(open_history())
    assert time.monotonic() - began < 2


def test_group_writable_folder_is_not_used(state):
    state.mkdir(mode=0o700)
    os.chmod(state, 0o777)
    assert not _on_disk(open_history())
    assert not (state / "history").exists()


def test_foreign_folder_is_not_used(state, monkeypatch):
    state.mkdir(mode=0o700)
    monkeypatch.setattr(console_history.os, "geteuid", lambda: os.stat(state).st_uid + 1)
    assert not _on_disk(open_history())


def test_huge_file_reads_only_its_tail_and_is_trimmed(state, monkeypatch):
    state.mkdir(mode=0o700)
    path = state / "history"
    block = "".join(f"\n# x\n+p {i}\n" for i in range(100_000)).encode()  # about 1.2 MB
    with open(path, "wb") as out:
        for _ in range(170):  # about 200 MB
            out.write(block)
        out.write(b"\n# x\n+p last\n")
    read = []
    real = os.pread
    monkeypatch.setattr(console_history.os, "pread", lambda fd, n, at: read.append(n) or real(fd, n, at))
    assert _entries(open_history()) == ["p last", "p 99999", "p 99998", "p 99997", "p 99996"]
    assert max(read) < 1 << 20
    assert path.stat().st_size < 1000  # rewritten to the kept entries


def test_invalid_utf8_loads_with_replacement(state):
    state.mkdir(mode=0o700)
    (state / "history").write_bytes(b"\n# x\n+p '\xff\xfe'\n")
    assert _entries(open_history()) == ["p '\ufffd\ufffd'"]


def test_size_zero_keeps_nothing_on_disk(state, monkeypatch):
    monkeypatch.setenv("LLMPDB_HISTORY_SIZE", "0")
    history = open_history()
    history.store_string("p 1")
    assert not _on_disk(history) and not state.exists()


def test_read_tail_partial_first_entry(tmp_path):
    path = tmp_path / "h"
    path.write_bytes(b"\n# a\n+one\n\n# b\n+two\n+lines\n")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert read_tail(fd, 1) == (["two\nlines"], True)
        assert read_tail(fd, 9) == (["two\nlines", "one"], False)
    finally:
        os.close(fd)
    assert history_path().name == "history"
