"""The cyclic garbage collector paused while a large file is parsed into objects that are all kept.

Usage::

    with gc_paused():
        header = json.loads(text)          # 200,000 entries: no collection runs half-way

A safetensors header of 200,000 tensors becomes about a million containers. Each time allocations pass
the collector's threshold it walks the young objects, and now and then every object: on such a header
about 45% of the time went to collections that freed nothing. The collector is off for the block and
on again after it, only if it was on before: a program that turned it off keeps it off. No object is
left uncollected: the next collection after the block sees everything the block made.
"""

from __future__ import annotations

import contextlib
import gc

__all__ = ["gc_paused"]


@contextlib.contextmanager
def gc_paused():
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
