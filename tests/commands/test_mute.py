"""``mute`` / ``mute HERE`` / ``unmute``: breakpoint() sites become no-ops for the rest of the run."""

from __future__ import annotations

import pytest

from llmpdb.breakpoints.muting import MUTING
from transcript import debug_transcript


@pytest.fixture(autouse=True)
def nothing_muted():
    MUTING.unmute()
    yield
    MUTING.unmute()


def loop_then_after(log):
    for i in range(3):
        breakpoint()
        log.append(i)
    breakpoint()  # a second site
    log.append("after")
    return log


def _stops(out: str) -> list[str]:
    return [line for line in out.splitlines() if "loop_then_after()" in line]


def test_mute_here_skips_only_this_site():
    log: list = []
    out = debug_transcript(loop_then_after, ["c", "p i", "mute HERE", "c", "p log", "c"], log)
    assert "muted breakpoint() at test_mute.py:20 for the rest of the run" in out
    assert len(_stops(out)) == 3  # the call, the first loop breakpoint(), then only the second site
    assert out.split("(llmpdb) ")[5].strip() == "[0, 1, 2]"  # p log at the second site: the loop ran on
    assert log == [0, 1, 2, "after"]


def test_mute_silences_every_site_and_unmute_restores_them():
    log: list = []
    out = debug_transcript(loop_then_after, ["c", "mute", "c"], log)
    assert "muted every breakpoint() for the rest of the run (unmute to undo)" in out
    assert len(_stops(out)) == 2
    assert log == [0, 1, 2, "after"]
    out = debug_transcript(loop_then_after, ["unmute", "c", "c", "c", "c", "c"], [])
    assert "breakpoint() stops again everywhere" in out
    assert len(_stops(out)) == 5


def test_mute_here_needs_a_breakpoint_stop_and_bad_input_is_one_line():
    out = debug_transcript(loop_then_after, ["mute HERE", "mute there", "unmute x", "unmute", "mute", "c"], [])
    assert "*** mute: this stop was not opened by breakpoint() or set_trace(): nothing to mute here" in out
    assert "*** mute: usage: mute [HERE]" in out
    assert "*** unmute: usage: unmute" in out
    assert "breakpoint() stops again everywhere (nothing was muted)" in out
