"""llmpdb.render.progress: drawn on a terminal only, after the delay, at most every interval, erased at the
end, never raising. Real pipes and pseudo-terminals; time comes from a clock the test advances."""

from __future__ import annotations

import os
import re

import pytest

from llmpdb.render.progress import Progress


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _drain(fd: int) -> bytes:
    os.set_blocking(fd, False)
    out = b""
    try:
        while chunk := os.read(fd, 65536):
            out += chunk
    except (BlockingIOError, OSError):
        pass
    return out


@pytest.fixture
def terminal():
    master, slave = os.openpty()
    stream = os.fdopen(slave, "w", encoding="utf-8")
    yield stream, master
    stream.close() if not stream.closed else None
    os.close(master)


@pytest.fixture(autouse=True)
def _plain(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.delenv("LLMPDB_COLOR", raising=False)
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LLMPDB_PROGRESS_DELAY", raising=False)


def test_into_a_pipe_nothing_is_written():
    read, write = os.pipe()
    stream = os.fdopen(write, "w")
    with Progress("statediff: reading shards", 4, stream=stream, delay=0, interval=0) as bar:
        for done in range(1, 5):
            bar.update(done)
    stream.close()
    assert os.read(read, 100) == b"" and bar.draws == 0
    os.close(read)


def test_on_a_terminal_it_waits_for_the_delay_redraws_at_most_every_interval_and_erases(terminal):
    stream, master = terminal
    clock = Clock()
    with Progress("statediff: reading shards", 40, stream=stream, width=60, clock=clock) as bar:
        for done, now in ((1, 100.3), (2, 100.6), (3, 100.65), (4, 100.71), (40, 100.72)):
            clock.now = now
            bar.update(done)
        assert bar.draws == 2  # 0.3 s: too soon; 0.6 s: drawn; 0.65 s: within 0.1 s; 0.71 s: drawn
    out = _drain(master).decode()
    assert out == ("\rstatediff: reading shards [#...................] 5% 2/40 1s\x1b[K"
                   "\rstatediff: reading shards [#..................] 10% 4/40 1s\x1b[K"
                   "\r\x1b[K")  # the bar, redrawn in place, then erased: the cursor is at a clean line's start
    assert all(len(line) == 59 for line in re.findall(r"\r([^\r\x1b]+)\x1b\[K", out))


def test_quick_work_draws_nothing_even_on_a_terminal(terminal):
    stream, master = terminal
    clock = Clock()
    with Progress("dump: writing", 10, stream=stream, clock=clock) as bar:
        for done in range(1, 11):
            clock.now += 0.04  # 0.4 s in all
            bar.update(done)
    assert _drain(master) == b"" and bar.draws == 0


def test_the_line_fits_the_width_and_shows_sizes_and_counts(monkeypatch):
    for width in (20, 33, 80, 200):
        bar = Progress("statediff: reading shards of a very long checkpoint name indeed", 7, width=width)
        assert len(bar.line(3)) <= width - 1
    monkeypatch.setenv("COLUMNS", "50")
    sized = Progress("dump: writing", 4 * 2**30, unit="bytes")
    assert sized.line(2**30) == "dump: writing [##........] 25% 1.0 GiB/4.0 GiB 0s"  # 49 columns
    assert Progress("diverge: run 1, module calls", width=80).line(1234) == "diverge: run 1, module calls 1,234 0s"


def test_colour_only_where_colour_is_on(terminal, monkeypatch):
    stream, _ = terminal
    assert "\x1b" not in Progress("x", 4, stream=stream, width=40).line(2)  # NO_COLOR
    monkeypatch.delenv("NO_COLOR")
    assert "\x1b[36m" in Progress("x", 4, stream=stream, width=40).line(2)


def test_a_stream_that_fails_turns_the_bar_off_without_raising(terminal):
    stream, master = terminal
    bar = Progress("statediff", 3, stream=stream, delay=0, interval=0)
    bar.update(1)
    stream.close()  # closed under it (the user closed stderr, a full disk would raise OSError alike)
    bar.update(2)
    bar.close()
    assert bar.draws == 1 and _drain(master).startswith(b"\rstatediff")
    with Progress("gone", 3, stream=None, enabled=False) as off:
        off.update(1)
    assert off.draws == 0


def test_the_delay_can_be_set_from_the_environment(terminal, monkeypatch):
    stream, _ = terminal
    monkeypatch.setenv("LLMPDB_PROGRESS_DELAY", "0")
    bar = Progress("x", 2, stream=stream)
    bar.update(1)
    assert bar.draws == 1
    bar.close()
