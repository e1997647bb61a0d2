"""Ctrl-C during ``continue`` stops the program at its next line, every time.

Usage::

    class Pdb(SafeInterruptMixin, pdb.Pdb): ...     # FastBreakpointsMixin already includes it
    register_delivery(Engine._local)                # a function through which events reach pdb

pdb's ``sigint_handler`` calls ``set_trace(frame)`` on the frame the signal interrupted. Python runs a
signal handler between bytecodes of whatever runs, and while breakpoints are armed that is most often the
debugger's own delivery code: pdb's ``trace_dispatch`` evaluating a false condition, or a fast engine's
trace function, hook or ``sys.monitoring`` callback. That frame is the debugger's: it is never traced, so
"the next line of the frame" (llmpdb's ``set_trace``) never comes and the interrupt is lost.

So the handler hands pdb the program's frame instead: the caller of the outermost delivery function on
the stack (the frame whose event was being delivered), or the interrupted frame itself when no delivery
function is on the stack. Delivery code still running after the handler must not undo what it set up:
``llmpdb_interrupts`` counts handled interrupts, so that the fast engine re-plans when one arrived while it
was planning (``FastBreakpointsMixin.fb_sync``), and the hooks only clear trace functions of their own.
"""

from __future__ import annotations

import bdb
import sys

from .engine import identity

__all__ = ["SafeInterruptMixin", "DELIVERY_CODE_IDS", "register_delivery", "program_frame"]

DELIVERY_CODE_IDS: set[int] = {identity(bdb.Bdb.trace_dispatch.__code__)}
"""Code objects of the functions through which events reach pdb (``register_delivery`` adds to it)."""


def register_delivery(*functions) -> None:
    """Usage: ``register_delivery(Engine._local, Engine._global)``; mark functions as event delivery."""
    for function in functions:
        DELIVERY_CODE_IDS.add(identity(function.__code__))


def program_frame(frame):
    """Usage: ``program_frame(frame)`` -> the caller of the outermost delivery function above ``frame``
    (the program frame whose event was being delivered), or ``frame`` when none is on the stack."""
    codes = DELIVERY_CODE_IDS
    found = frame
    walk = frame
    while walk is not None:
        if identity(walk.f_code) in codes and walk.f_back is not None:
            found = walk.f_back
        walk = walk.f_back
    return found


class SafeInterruptMixin:
    """Mixin for ``pdb.Pdb``: Ctrl-C while running stops at the next line of the program's frame."""

    llmpdb_interrupts = 0
    """How many Ctrl-C's were handled while the program ran: the fast engine re-plans when it changes while
    it plans (read it as a plain attribute: between a plain read and a ``return`` no handler can run)."""

    def sigint_handler(self, signum, frame):
        if not self.allow_kbdint:
            sys.settrace(None)  # pdb's set_trace installs its trace function again; nothing before is traced
            dispatch = getattr(type(self).trace_dispatch, "__code__", None)  # a mixin's override (`catch`)
            if dispatch is not None:
                DELIVERY_CODE_IDS.add(identity(dispatch))
            frame = program_frame(frame)
            self.llmpdb_interrupts += 1
        super().sigint_handler(signum, frame)
