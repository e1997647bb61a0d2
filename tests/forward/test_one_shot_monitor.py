"""The one-shot wait for a forward on Python 3.12+ (``OneShotMonitor``): a local ``PY_START`` event on one
code object, never a global trace function. Torch-free (plain classes play the module and torch's
module call), so it runs in the core suites on 3.12 and 3.13; on 3.11 the trace-function wait is used."""

from __future__ import annotations

import functools
import sys

import pytest

from llmpdb.forward.one_shot import OneShotTrace
from llmpdb.forward.one_shot_monitor import OneShotMonitor, forget_waits, one_shot

MONITORING = getattr(sys, "monitoring", None)
needs_monitoring = pytest.mark.skipif(MONITORING is None, reason="sys.monitoring is 3.12+")


def passes_through(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):  # a decorator between the module call and the forward, as transformers has
        return func(*args, **kwargs)
    return wrapper


class Layer:
    @passes_through
    def forward(self, x):
        return x + 1


FORWARD_CODE = Layer.forward.__wrapped__.__code__


def module_call(layer, x, arrivals, *, before=None, error=None):
    """Plays torch's ``_call_impl``: the pre-hook arms the wait, then the forward runs (another layer's
    forward first when ``before`` is given)."""
    def on_arrive(frame):
        arrivals.append((frame.f_locals["self"], frame.f_locals["x"], frame.f_code.co_name))
        if error is not None:
            raise error

    errors = []
    one_shot(layer, FORWARD_CODE, on_arrive, sys._getframe(), on_error=errors.append).install()
    if before is not None:
        before.forward(100)  # the same code, another instance: no arrival
    return layer.forward(x), errors


def our_tools() -> list[int]:
    return [tool for tool in (0, 3, 4) if MONITORING.get_tool(tool) == "llmpdb"]


@needs_monitoring
def test_the_wait_arrives_once_at_its_modules_forward_past_a_decorator_and_gives_the_tool_back():
    target, other = Layer(), Layer()
    arrivals: list = []
    result, errors = module_call(target, 1, arrivals, before=other)
    assert result == 2 and errors == []
    assert arrivals == [(target, 1, "forward")]
    target.forward(5)  # called again without a module call: the wait is over
    assert arrivals == [(target, 1, "forward")]
    # the tool id and the event on the forward's code stay for the next wait (a false condition is waited
    # for at every call of its module): no re-instrumentation per call
    assert our_tools() != [] and MONITORING.get_local_events(our_tools()[0], FORWARD_CODE) != 0
    module_call(target, 6, arrivals)
    assert arrivals[1:] == [(target, 6, "forward")]
    forget_waits()  # the module breakpoints were cleared: event off, tool id free
    assert our_tools() == [] and all(MONITORING.get_local_events(tool, FORWARD_CODE) == 0 for tool in (0, 3, 4))


@needs_monitoring
def test_a_wait_whose_module_call_ended_does_not_arrive_at_a_direct_call_and_the_next_call_replaces_it():
    target = Layer()
    arrivals: list = []

    def arm_and_leave():  # a module call that returned without reaching the forward (a pre-hook raised)
        one_shot(target, FORWARD_CODE, lambda frame: arrivals.append("stale"), sys._getframe()).install()

    arm_and_leave()
    assert target.forward(3) == 4 and arrivals == []  # a direct call: that module call is not its caller
    assert our_tools() != []  # still waiting
    result, _ = module_call(target, 4, arrivals)  # the module's next call replaces the wait
    assert result == 5 and arrivals == [(target, 4, "forward")]
    forget_waits()
    assert our_tools() == []


@needs_monitoring
def test_an_error_in_on_arrive_goes_to_on_error_and_never_into_the_program():
    arrivals: list = []
    result, errors = module_call(Layer(), 2, arrivals, error=RuntimeError("debugger failed"))
    assert result == 3 and len(arrivals) == 1
    assert [str(e) for e in errors] == ["debugger failed"]
    forget_waits()
    assert our_tools() == []


@needs_monitoring
def test_a_trace_function_in_place_keeps_every_event_and_forget_waits_gives_the_tool_back():
    seen: list = []

    def tracer(frame, event, arg):
        if frame.f_code is FORWARD_CODE:
            seen.append(event)
        return tracer

    sys.settrace(tracer)
    try:
        arrivals: list = []
        module_call(Layer(), 1, arrivals)
        assert sys.gettrace() is tracer
    finally:
        sys.settrace(None)
    assert seen[:2] == ["call", "line"] and "return" in seen and len(arrivals) == 1
    forget_waits()
    target = Layer()
    one_shot(target, FORWARD_CODE, lambda frame: arrivals.append("never"), sys._getframe()).install()
    assert our_tools() != []
    forget_waits()
    assert our_tools() == []
    target.forward(1)
    assert arrivals[1:] == []


def test_one_shot_takes_the_monitor_on_3_12_and_the_trace_function_on_3_11_or_with_no_code():
    waiter = one_shot(Layer(), FORWARD_CODE, lambda frame: None, sys._getframe())
    assert isinstance(waiter, OneShotMonitor if MONITORING is not None else OneShotTrace)
    forget_waits()
    assert isinstance(one_shot(Layer(), None, lambda frame: None, sys._getframe()), OneShotTrace)
