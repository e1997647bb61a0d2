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


def test_plain_floats_cost_what_a_float_costs():
    # each float of a header used to be an object with its own dict (~370 bytes): 26 million of them,
    # under the 100 MB limit, needed ~12 GB
    import tracemalloc

    raw = b'{"a": [' + b",".join([b"1.0"] * 100_000) + b"]}"
    tracemalloc.start()
    try:
        parsed = load_json(raw, "h.safetensors", "safetensors header")
        used, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert parsed["a"][0] == 1.0 and type(parsed["a"][0]) is float
    assert used / 100_000 < 60, f"{used / 100_000:.0f} bytes a float"
    assert repr(load_json(b'{"s": [1e400, 8e0]}', "h", "h")["s"]) == "[1e400, 8e0]"  # as written


def test_a_header_too_large_for_the_memory_left_is_one_refusal_line():
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (250 * 2**20, 250 * 2**20))
        from llmpdb.inspect.checkpoint_guard import CheckpointError, load_json
        raw = b'{"a": [' + b"0," * 40_000_000 + b'0]}'
        try:
            load_json(raw, "big.safetensors", "safetensors header")
        except CheckpointError as exc:
            print(exc)
    """)
    root = __file__.rsplit("/tests/", 1)[0]
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                            env={"PYTHONPATH": root, "PATH": "/usr/bin:/bin"})
    assert result.stdout.strip() == ("big.safetensors: refused: safetensors header (76.3 MiB) needs more "
                                     "memory than this process has"), result.stdout + result.stderr
    assert "Traceback" not in result.stderr
