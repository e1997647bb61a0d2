"""Every numeric option of llmpdb commands refuses out-of-range, fractional, huge and 5000-digit values with
one line naming the option and the accepted range; the debuggee keeps running (issue #10)."""

from __future__ import annotations

import pytest
from tiny_models import tiny_llama
from transcript import debug_transcript

from llmpdb.commands._command import whole_number


def stop_with_model():
    model = tiny_llama()
    x = model.lm_head.weight
    breakpoint()
    return model, x


OPTIONS = [("trace --depth", "--depth", "needs a whole number from 0 to 1000"),
           ("mem --top", "--top", "needs a whole number from 1 to 1000000"),
           ("show x --hist --bins", "--bins", "needs a whole number from 1 to 1000"),
           ("tokens x --row", "--row", "needs a whole number from 0 to 1000000000"),
           ("break-module model.norm --after", "--after", "needs a whole number from 0 to 1000000000"),
           ("dump x --max-mib", "--max-mib", "a number of MiB > 0 and at most 1000000000")]
VALUES = ["-1", "1.5", "1" + "0" * 100, "9" * 5000, "nan", "inf", "1e3", "٣"]


@pytest.mark.parametrize("typed, name, accepted", OPTIONS, ids=[o[1] for o in OPTIONS])
def test_bad_numbers_are_one_line_naming_the_option_and_range(typed, name, accepted, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    values = [v for v in VALUES if not (name == "--max-mib" and v in ("1.5", "1e3", "٣"))]  # MiB may be fractional
    out = debug_transcript(stop_with_model, ["c", *(f"{typed} {v}" for v in values), "p 'alive'", "c"])
    chunks = [c.rstrip("\n") for c in out.split("(llmpdb) ")[2:]]
    command = typed.split()[0]
    for value, chunk in zip(values, chunks):
        shown = value if len(value) <= 40 else value[:24] + "…" + value[-12:]
        assert chunk.startswith(f"*** {command}: bad value for {name}: {shown!r}: {accepted} (usage: "), chunk
        assert "\n" not in chunk
    assert chunks[len(values)] == "'alive'"


def test_whole_number_accepts_its_range_only():
    depth = whole_number(0, 1000)
    assert [depth(v) for v in ("0", "7", "+3", "1000")] == [0, 7, 3, 1000]
    for bad in ("-1", "1001", "0x10", "1_0", " ", "", "1.0"):
        with pytest.raises(ValueError, match="needs a whole number from 0 to 1000"):
            depth(bad)
