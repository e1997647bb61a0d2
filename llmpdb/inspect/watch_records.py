"""Watched expressions: what one evaluated to at each stop, as metadata, and what changed.

Usage::

    watch = Watch(1, "attention_mask")
    watch.record(observe(value), stop=1, where="main")    # observe(): a Sample of tensor metadata
    watch.record(failed(exc), stop=2, where="forward")     # the expression raised: kept as a line
    changed_fields(watch.runs[0].sample, watch.runs[-1].sample)  # "shape, dtype"

Consecutive stops with the same sample share one ``Run`` (``first``..``last`` stop). Only metadata is kept
(``value_summary``); the value itself is never stored, so a watch keeps no tensor alive.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .safe import is_tensor, safe_getattr, short_dtype
from .shape_summary import tensor_shape, value_summary

__all__ = ["Sample", "Run", "Watch", "observe", "failed", "changed_fields", "RUN_LIMIT"]

RUN_LIMIT = 200


@dataclass(frozen=True)
class Sample:
    """What the expression was at one stop: its summary text; ``fields`` for a single tensor."""

    text: str
    fields: tuple[tuple[str, str], ...] = ()   # (("shape", "(1, 7)"), ("dtype", "i64"), ...)
    error: bool = False
    out_of_scope: bool = False                 # a NameError: the stop is in a frame without the name


@dataclass
class Run:
    """Consecutive stops where the watch saw the same sample."""

    first: int
    last: int
    sample: Sample
    where: str = ""
    last_where: str = ""

    @property
    def places(self) -> str:
        """``main:35``, or ``main:35 … main:39`` when the run's stops were at different places."""
        return self.where if self.last_where in ("", self.where) else f"{self.where} … {self.last_where}"


@dataclass
class Watch:
    """One ``watch EXPR``: its number, the text typed, and its history of runs (oldest first)."""

    number: int
    expr: str
    runs: list[Run] = field(default_factory=list)
    code: Any = field(default=None, repr=False)

    def record(self, sample: Sample, stop: int, where: str = "") -> Run | None:
        """Usage: ``watch.record(sample, stop)``; the previous run when the sample changed, else None.

        A stop where the expression is out of scope (a ``NameError`` in another frame: a module's forward)
        after one where it had a value is no change: nothing is recorded; the value is compared again at the
        next stop where the name is in scope."""
        last = self.runs[-1] if self.runs else None
        if sample.out_of_scope and last is not None and not last.sample.out_of_scope:
            return None
        if last is not None and last.last == stop:  # the same stop seen again (`watch` typed after the note)
            return None
        if last is not None and last.sample == sample:
            last.last, last.last_where = stop, where
            return None
        self.runs.append(Run(stop, stop, sample, where))
        del self.runs[:-RUN_LIMIT]
        return last


def observe(value: Any) -> Sample:
    """Usage: ``observe(mask)`` -> ``Sample("(1, 7) i64", (("shape", "(1, 7)"), ("dtype", "i64"), ...))``."""
    text = value_summary(value)
    if not is_tensor(value):
        return Sample(text)
    layout = str(safe_getattr(value, "layout", "torch.strided")).replace("torch.", "")
    fields = (("shape", tensor_shape(value)), ("dtype", short_dtype(safe_getattr(value, "dtype", "?"))),
              ("device", str(safe_getattr(value, "device", "?"))), ("layout", layout))
    return Sample(text, fields)


def failed(exc: BaseException) -> Sample:
    """Usage: ``failed(exc)``; the sample of an expression that raised (``NameError: name 'x' ...``)."""
    message = str(exc).splitlines()[0] if str(exc) else ""
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return Sample(text[:120], error=True, out_of_scope=isinstance(exc, NameError))


def changed_fields(old: Sample, new: Sample) -> str:
    """Usage: ``changed_fields(a, b)`` -> ``"shape, dtype"``; ``"value"`` when not two single tensors."""
    if old.fields and new.fields:
        before, after = dict(old.fields), dict(new.fields)
        return ", ".join(k for k in before if before[k] != after.get(k)) or "value"
    return "value"
