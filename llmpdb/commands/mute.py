"""``mute`` / ``unmute``: turn ``breakpoint()`` sites into no-ops for the rest of the run (an IDE's "mute
breakpoints").

Usage (at the prompt)::

    mute          every breakpoint() and llmpdb.set_trace() call does nothing from now on
    mute HERE     only the breakpoint() that opened this stop (a breakpoint() inside a loop)
    unmute        every site stops again
"""

from __future__ import annotations

import os

from ..breakpoints.muting import MUTING
from ._command import CommandError, command

__all__ = ["MuteCommands"]


class MuteCommands:
    """Command mixin: ``mute``, ``unmute``."""

    @command
    def do_mute(self, arg):
        """mute [HERE]
        Make breakpoint() calls no-ops for the rest of the run: every one (and llmpdb.set_trace()), or
        with HERE the one that opened this stop (a breakpoint() inside a training loop). Line
        breakpoints (b), break-module and catch still stop. unmute undoes it.
        Example: mute HERE"""
        text = (arg or "").strip()
        if not text:
            MUTING.mute_all = True
            self.message("muted every breakpoint() for the rest of the run (unmute to undo)")
            return
        if text.upper() != "HERE":
            raise CommandError("usage: mute [HERE]")
        frames = [entry[0] for entry in self.stack_frames()]
        site = MUTING.site_in(frames)
        if site is None:
            raise CommandError("this stop was not opened by breakpoint() or set_trace(): nothing to mute here")
        MUTING.mute_site(site)
        self.message(f"muted breakpoint() at {os.path.basename(site[0])}:{site[1]} for the rest of the run")

    @command
    def do_unmute(self, arg):
        """unmute
        Every breakpoint() stops again (undoes mute and every mute HERE).
        Example: unmute"""
        if (arg or "").strip():
            raise CommandError("usage: unmute")
        count = len(MUTING.sites) + MUTING.mute_all
        MUTING.unmute()
        self.message("breakpoint() stops again everywhere" + ("" if count else " (nothing was muted)"))
