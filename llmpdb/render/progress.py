"""A one-line progress bar on standard error, for work that takes seconds; drawn only on a terminal.

Usage::

    with Progress("statediff: shards", total=len(shards)) as bar:
        for i, shard in enumerate(shards):
            read(shard)
            bar.update(i + 1)                       # or hand ``bar.update`` to a function as its callback

    statediff(model, path, progress=Progress("statediff: shards").update)   # then ``.close()`` it

Nothing is drawn unless the stream is a terminal (a pipe, a file, a closed stream: nothing is written),
``TERM`` is not ``dumb`` and the work has run ``delay`` seconds (0.5 s; ``LLMPDB_PROGRESS_DELAY`` sets
it): quick work shows nothing. Then at most one redraw per ``interval`` (0.1 s), fitted to the
terminal's width (``width=``, else ``COLUMNS``, else the terminal's own), one line that ``\\r`` rewrites.
``close()`` (the end of the ``with``) erases it, leaving the cursor at the start of a clean line, so the
command's report follows as if no bar had been there. The filled part is coloured only where colour is on
(``NO_COLOR`` turns it off). It never raises: a stream that fails (closed, full, gone) turns it off.
The default stream is the process's own standard error (``sys.__stderr__``), never a replacement the
program installed in ``sys.stderr``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

from ..units import human_bytes
from .style import color_enabled

__all__ = ["Progress", "DELAY", "INTERVAL"]

DELAY = 0.5  # seconds of work before the first draw
INTERVAL = 0.1  # seconds between redraws: at most 10 a second
_ERASE = "\r\x1b[K"


def _on_terminal(stream: Any) -> bool:
    try:
        return os.isatty(stream.fileno()) and os.environ.get("TERM", "") != "dumb"
    except (AttributeError, ValueError, OSError, TypeError):  # no descriptor, closed, a StringIO
        return False


def _delay() -> float:
    text = os.environ.get("LLMPDB_PROGRESS_DELAY", "")
    try:
        return max(0.0, float(text)) if text else DELAY
    except ValueError:
        return DELAY


class Progress:
    """A bar for ``label``; ``total`` may be None (a count is shown) and may arrive with ``update``.

    ``unit="bytes"`` shows sizes (``1.2 GiB/4.0 GiB``) instead of counts. ``enabled=False`` draws nothing
    (a command whose output is not this terminal: an attached client, a log file)."""

    def __init__(self, label: str, total: int | None = None, *, unit: str = "", stream: Any = None,
                 enabled: bool = True, delay: float | None = None, interval: float = INTERVAL,
                 width: int | None = None, clock: Callable[[], float] = time.monotonic):
        self.label, self.total, self.unit = label, total, unit
        self._stream = sys.__stderr__ if stream is None else stream
        self._on = bool(enabled) and _on_terminal(self._stream)
        self._delay = _delay() if delay is None else delay
        self._interval, self._width, self._clock = interval, width, clock
        self._start = clock()
        self._last = float("-inf")
        self._shown = False
        self._color = self._on and color_enabled(self._stream)
        self.draws = 0

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def update(self, done: int, total: int | None = None) -> None:
        """Usage: ``bar.update(3)`` or ``bar.update(3, 40)``; redraws when due, else returns at once."""
        if total is not None:
            self.total = total
        if not self._on:
            return
        now = self._clock()
        if now - self._start < self._delay or now - self._last < self._interval:
            return
        self._last = now
        try:
            text = "\r" + self.line(done) + "\x1b[K"
        except Exception:  # a count that is not a number: no bar rather than an error in the work
            self._on = False
            return
        if self._write(text):
            self._shown = True
            self.draws += 1

    def close(self) -> None:
        """Usage: ``bar.close()``; erases the bar if it was drawn (idempotent)."""
        if self._shown:
            self._write(_ERASE)
        self._shown = False
        self._on = False

    def _columns(self) -> int:
        if self._width:
            return self._width
        if os.environ.get("COLUMNS", "").isdigit():
            return int(os.environ["COLUMNS"])
        try:
            return os.get_terminal_size(self._stream.fileno()).columns
        except (AttributeError, ValueError, OSError):
            return 80

    def _amount(self, n: int) -> str:
        return human_bytes(n) if self.unit == "bytes" else f"{n:,}"

    def line(self, done: int) -> str:
        """Usage: ``bar.line(3)`` -> ``"statediff: shards [#####.....] 50% 3/6 1s"``; fitted to the width."""
        columns = max(20, self._columns()) - 1  # the last column would wrap on some terminals
        elapsed = max(0.0, self._clock() - self._start)
        total = self.total
        count = self._amount(done) + (f"/{self._amount(total)}" if total else "")
        label = self.label if len(self.label) <= columns // 2 else self.label[:columns // 2 - 1] + "…"
        if not total:
            return f"{label} {count} {elapsed:.0f}s"[:columns]
        fraction = min(1.0, max(0.0, done / total))
        tail = f" {int(fraction * 100)}% {count} {elapsed:.0f}s"
        room = columns - len(label) - len(tail) - 3
        if room < 5:
            return (label + tail)[:columns]
        filled = int(room * fraction)
        bar = "#" * filled + "." * (room - filled)
        if self._color:
            bar = f"\x1b[36m{bar[:filled]}\x1b[2m{bar[filled:]}\x1b[0m"
        return f"{label} [{bar}]{tail}"

    def _write(self, text: str) -> bool:
        try:
            self._stream.write(text)
            self._stream.flush()
            return True
        except Exception:  # closed, full (ENOSPC), a broken pipe: the bar is a nicety, the work goes on
            self._on = self._shown = False
            return False
