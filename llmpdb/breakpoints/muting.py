"""Muted ``breakpoint()`` sites: ``mute`` silences every one for the rest of the run, ``mute HERE`` one.

Usage::

    from llmpdb.breakpoints.muting import MUTING
    if MUTING.skip(frame): return        # hooks.py, before a breakpoint()/set_trace() stop
    MUTING.opened(frame)                 # remember the site that opened this stop (for `mute HERE`)
    MUTING.mute_site(site); MUTING.mute_all = True; MUTING.unmute()

A site is ``(filename, lineno)`` of the ``breakpoint()`` (or ``llmpdb.set_trace()``) call. Line breakpoints
(``b file:line``), ``break-module`` and ``catch`` stops are not sites and are never muted.
"""

from __future__ import annotations

__all__ = ["Muting", "MUTING", "site_of"]


def site_of(frame) -> tuple[str, int]:
    """Usage: ``site_of(frame)`` -> ``("train.py", 42)``; where ``frame`` is now."""
    return frame.f_code.co_filename, frame.f_lineno


class Muting:
    """The process's muted sites; ``last`` is the site that opened the latest stop, with its frame's id."""

    def __init__(self) -> None:
        self.mute_all = False
        self.sites: set[tuple[str, int]] = set()
        self.last: tuple[int, str, int] | None = None

    def skip(self, frame) -> bool:
        return self.mute_all or (bool(self.sites) and site_of(frame) in self.sites)

    def opened(self, frame) -> None:
        self.last = (id(frame), *site_of(frame))

    def site_in(self, frames) -> tuple[str, int] | None:
        """The site that opened the latest stop, if its frame is among ``frames`` (this stop's stack)."""
        if self.last is None:
            return None
        frame_id, filename, lineno = self.last
        if any(id(f) == frame_id and f.f_code.co_filename == filename for f in frames):
            return filename, lineno
        return None

    def mute_site(self, site: tuple[str, int]) -> None:
        self.sites.add(site)

    def unmute(self) -> None:
        self.mute_all = False
        self.sites.clear()


MUTING = Muting()
