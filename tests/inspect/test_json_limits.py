"""``load_json`` reads numbers of at most 19 digits whether or not it takes its fast path (no run of 20
digits anywhere in the text: ints are then not checked one by one), and the collector it pauses while
parsing is on again after, or still off when the program had turned it off."""

from __future__ import annotations

import gc
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmpdb.inspect.checkpoint_guard import CheckpointError, load_json
from llmpdb.inspect.gc_paused import gc_paused

DIGITS = st.integers(min_value=1, max_value=30).flatmap(lambda n: st.text("0123456789", min_size=n, max_size=n))


@settings(max_examples=200, deadline=None)
@given(number=DIGITS, key_digits=DIGITS, sign=st.sampled_from(["", "-"]))
def test_a_number_is_refused_exactly_when_it_has_more_than_19_digits(number, key_digits, sign):
    number = number.lstrip("0") or "0"
    text = f'{{"w{key_digits}": {{"shape": [{sign}{number}]}}}}'.encode()
    if len(number) > 19:
        with pytest.raises(CheckpointError, match=f"a {len(number)}-digit number"):
            load_json(text, "h.safetensors", "safetensors header")
    else:  # a long digit run in a key only sends the text the slow way: the same answer
        assert load_json(text, "h.safetensors", "safetensors header") == json.loads(text)


def test_the_collector_is_on_again_after_a_parse_and_off_if_it_was_off():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(CheckpointError):  # a refused parse turns it on again too
        load_json(b'{"a": 1, "a": 2}', "x.json", "index")
    assert gc.isenabled()
    gc.disable()
    try:
        assert load_json(b'{"a": [1, 2]}', "x.json", "index") == {"a": [1, 2]}
        assert not gc.isenabled()  # the program's choice is kept
    finally:
        gc.enable()
