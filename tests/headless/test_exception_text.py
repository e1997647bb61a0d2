"""The text of a user's exception: bounded, and no property of the exception runs (real exceptions)."""

from __future__ import annotations

import sys
import time
import traceback

from llmpdb.headless.exception_text import (exception_chain, exception_field, one_line, python_traceback_text,
                                            traceback_text)


def raised(make):
    try:
        make()
    except BaseException as exc:  # noqa: BLE001
        return exc
    raise AssertionError("did not raise")


def deep_chain(depth):
    exc = None
    for i in range(depth):
        try:
            if exc is None:
                raise ValueError("root")
            raise RuntimeError(f"level {i}") from exc
        except Exception as caught:
            exc = caught
    return exc


def test_a_deep_chain_keeps_both_ends_and_counts_the_rest_in_linear_time():
    started = time.monotonic()
    exc = deep_chain(20_000)
    chain = exception_chain(exc)
    text = traceback_text(exc)
    assert time.monotonic() - started < 10
    assert [item for item in chain if isinstance(item, int)] == [19_975]
    assert chain[0].args == ("root",) and chain[-1] is exc
    assert "[... 19,975 chained exceptions left out ...]" in text
    assert text.count("The above exception was the direct cause") == 23
    assert text.rstrip().endswith("RuntimeError: level 19999")


def test_a_short_chain_is_what_python_prints():
    exc = deep_chain(4)
    assert traceback_text(exc) == "".join(traceback.format_exception(exc))
    assert python_traceback_text(exc) == "".join(traceback.format_exception(exc))


def test_a_deep_traceback_keeps_its_first_and_last_frames():
    def down(n):
        return down(n + 1)

    exc = raised(lambda: down(0))
    text = traceback_text(exc)
    assert "frames left out ...]" in text and "Previous line repeated" in text
    assert text.count("\n") < 500
    assert text.rstrip().endswith("RecursionError: maximum recursion depth exceeded")


def test_a_huge_message_is_cut_and_says_how_much():
    exc = raised(lambda: (_ for _ in ()).throw(ValueError("A" + "m" * 10_000_000 + "Z")))
    text = traceback_text(exc)
    assert len(text) < 10_000
    assert "ValueError: Ammm" in text and "mmmZ" in text and "[... 9,996,002 characters cut ...]" in text
    assert len(one_line(exc)) < 400


class Hostile(Exception):
    touched: list = []

    @property
    def __traceback__(self):
        Hostile.touched.append("__traceback__")
        raise RuntimeError("gotcha")

    @property
    def __cause__(self):
        Hostile.touched.append("__cause__")
        raise RuntimeError("gotcha")

    @property
    def __context__(self):
        Hostile.touched.append("__context__")
        raise RuntimeError("gotcha")

    @property
    def __suppress_context__(self):
        Hostile.touched.append("__suppress_context__")
        raise RuntimeError("gotcha")

    def __str__(self):
        raise SystemExit("gotcha str")


def test_overriding_properties_never_run_and_a_failing_str_is_a_placeholder():
    def fail():
        try:
            {}["missing"]
        except KeyError as exc:
            raise Hostile() from exc

    exc = raised(fail)
    assert exception_field(exc, "__cause__").args == ("missing",)
    for text in (traceback_text(exc), python_traceback_text(exc)):
        assert "KeyError: 'missing'" in text and "direct cause" in text
        assert text.rstrip().endswith(".Hostile: <exception str() failed>")
        assert 'in fail\n    raise Hostile() from exc' in text
    assert one_line(exc) == f"{__name__}.Hostile: <exception str() failed>"
    assert Hostile.touched == []


def test_groups_and_notes_are_shown_bounded():
    def fail():
        exc = ExceptionGroup("many", [ValueError(i) for i in range(50)])
        for i in range(30):
            exc.add_note(f"note {i}")
        raise exc

    text = traceback_text(raised(fail))
    assert "ExceptionGroup: many (50 sub-exceptions)\nnote 0\n" in text
    assert "[... 20 more notes ...]" in text and "note 10" not in text
    assert "  +-- 1: ValueError: 0\n" in text and "[... 40 more exceptions ...]" in text


def test_a_plain_exception_gets_pythons_own_text():
    exc = raised(lambda: int("x"))
    assert python_traceback_text(exc) == "".join(traceback.format_exception(exc))
    assert sys.exc_info() == (None, None, None)
