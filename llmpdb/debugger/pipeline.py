"""The stop pipeline: what happens at every stop, in order, in one place; and the one dispatcher of events.

Usage::

    from llmpdb.debugger.pipeline import STOP_PIPELINE, EVENT_CONSUMERS, StopPipeline
    class Pdb(DistributedMixin, ..., StopPipeline, BasePdb): ...   # StopPipeline right before the base
    [name for name, _ in STOP_PIPELINE]    # ['ranks', 'catch', 'explain', 'step request', ...]

Every stop (a line breakpoint, a step, ``breakpoint()``, post-mortem, a module breakpoint, a catch) enters
pdb's ``interaction``. ``StopPipeline.interaction`` is the only ``interaction`` of llmpdb's: it runs the
stages of ``STOP_PIPELINE`` in this order, outermost first. A stage is a method ``stage(stop, proceed)`` of
the mixin that owns the concern: it does its part, calls ``proceed()`` to run the stages after it and
returns what that returns, or returns without calling it to end the stop there (a rank that runs on, a
stop the headless policy skips). What a stage sets up before ``proceed()`` it undoes after it. After the
last stage comes the base class's ``interaction``: the stop's header, then ``preloop`` (the stop notes:
compiled-code warning, KV record, path line, watch records), then the prompt (``console/``).

Before the pipeline, ``llmpdb.hooks`` decides whether a ``breakpoint()`` stops at all (``LLMPDB_DISABLE``,
``mute``) and reserves the thread gate for the thread that stops.

Events. Whatever delivers trace events to pdb (pdb's own ``sys.settrace``, or the fast engine's
``fb_deliver`` in ``breakpoints/mixin.py``) calls ``trace_dispatch`` of the class after it, which is
``StopPipeline.trace_dispatch``: each consumer of ``EVENT_CONSUMERS`` may claim the event (returning the
frame's next local trace function) before pdb decides about it. No consumer sits in front of the engine
in the class's MRO, so none can be skipped by a ``super()`` call (``tests/debugger/test_pipeline.py``).
"""

from __future__ import annotations

import sys

__all__ = ["STOP_PIPELINE", "EVENT_CONSUMERS", "Stop", "StopPipeline"]

# (name, method of the composed Pdb), outermost first.
STOP_PIPELINE: tuple[tuple[str, str], ...] = (
    ("host capture", "stop_host_capture"),        # debugger/pytest_capture.py: pytest's capture off for the stop
    ("ranks", "stop_ranks"),                      # ranks/mixin.py: one prompt for a job; others park or run on
    ("catch", "stop_catch"),                      # commands/catch.py: raises at the prompt never catch-stop
    ("explain", "stop_explain"),                  # commands/explain.py: the traceback this stop opened with
    ("step request", "stop_step_request"),        # debugger/stepping.py: a step request lasts until a stop
    ("thread gate", "stop_thread_gate"),          # debugger/thread_gate.py: one thread stops at a time
    ("headless policy", "stop_headless_policy"),  # headless/policy.py: no terminal: attach, log or skip
    ("streams", "stop_fit_streams"),              # headless/tour.py: closed or write-only streams fitted
    ("stop state", "stop_state"),                 # debugger/core.py: per-stop state forgotten afterwards
)

# (name, method): called with (frame, event, arg) before pdb's own trace_dispatch, in this order; a consumer
# returns the frame's next local trace function to claim the event, or None to leave it to the next one.
EVENT_CONSUMERS: tuple[tuple[str, str], ...] = (
    ("catch", "event_catch"),                     # commands/catch.py: a raise a catch stops at
)


class Stop:
    """One stop as ``interaction`` was called: ``frame`` and ``tb_or_exc`` (a traceback, or on 3.13+
    post-mortem the exception itself) read from the arguments, which are handed on unchanged. (A plain
    class, as the small records on the way to the first prompt are: a dataclass costs ~0.5 ms to define.)"""

    __slots__ = ("args", "kwargs")

    def __init__(self, args: tuple, kwargs: dict | None = None):
        self.args = args
        self.kwargs = {} if kwargs is None else kwargs

    @property
    def frame(self):
        return self.args[0] if self.args else self.kwargs.get("frame")

    @property
    def tb_or_exc(self):
        if len(self.args) > 1:
            return self.args[1]
        return self.kwargs.get("tb_or_exc", self.kwargs.get("traceback"))


def _traceback_for_exception(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """Before 3.13 pdb's ``interaction`` takes a traceback; IPython's ``%debug`` hands it the exception
    (``sys.last_value``): its ``__traceback__`` is what pdb wants."""
    if sys.version_info >= (3, 13) or len(args) < 2 or not isinstance(args[1], BaseException):
        return args, kwargs
    return (args[0], args[1].__traceback__, *args[2:]), kwargs


class StopPipeline:
    """The one ``interaction`` (the stages of ``STOP_PIPELINE``) and the one event dispatcher."""

    STOP_PIPELINE = STOP_PIPELINE
    EVENT_CONSUMERS = EVENT_CONSUMERS

    def interaction(self, *args, **kwargs):
        stop = Stop(*_traceback_for_exception(args, kwargs))
        stages = [getattr(self, method) for _, method in STOP_PIPELINE]
        base = super().interaction

        def run(index: int):
            if index == len(stages):
                return base(*stop.args, **stop.kwargs)
            return stages[index](stop, lambda: run(index + 1))

        return run(0)

    def trace_dispatch(self, frame, event, arg, _finalizing=sys.is_finalizing):
        if _finalizing():  # after atexit: modules' globals (bdb's, ours) are being cleared; a __del__ that
            return None    # runs then would only print "Exception ignored" noise
        for _, method in EVENT_CONSUMERS:
            claimed = getattr(self, method)(frame, event, arg)
            if claimed is not None:
                return claimed
        return super().trace_dispatch(frame, event, arg)
