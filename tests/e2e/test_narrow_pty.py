"""An 80-column terminal: every table llmpdb prints fits it (examples/infer.py, typed into a real pty)."""

from __future__ import annotations

import pytest

from .pty_session import PtySession

pytestmark = pytest.mark.timeout(180)

PDB_LINES = ("[", "-> ", "path: ", "module breakpoint")  # pdb's frame and source lines, the stop header


def over(text: str, width: int) -> list[str]:
    return [line for line in text.splitlines() if len(line) > width and not line.startswith(PDB_LINES)]


def test_tables_fit_an_80_column_terminal():
    with PtySession(["-m", "llmpdb", "examples/infer.py"], width=80) as s:
        s.wait_prompt()
        for _ in range(3):
            s.run("c")                                    # stop 3: after the model call
        printed = {cmd: s.run(cmd) for cmd in ("shapes", "shapes --stats", "kv", "kv 0 --stats",
                                               "bm layers.0.self_attn --once", "bm")}
        printed["stop"] = s.run("c")                      # inside layers.0.self_attn, during generate()
        printed.update({cmd: s.run(cmd) for cmd in ("sm", "shapes ", "kv")})
        s.finish("c")
    assert s.exitstatus == 0
    for cmd, text in printed.items():
        assert not over(text, 80), (cmd, over(text, 80))
    table = printed["shapes"].splitlines()
    assert table[0].split()[:2] == ["path", "shape"]
    keys = next(line for line in table if line.split()[0].endswith("layers[1].keys"))
    assert keys.startswith("outputs…")                    # the path is cut in the middle
    assert "(1, 2, 7, 16)" in keys                        # the shape is whole, the dims are there
    assert keys.rstrip().endswith("batch·kvh·seq·hd")
    assert "dims abbreviated: kvh kv_heads, hd head_dim" in printed["shapes"]
    assert printed["shapes --stats"].splitlines()[0].split()[-1] == "dims"
    assert "self_attn" in printed["sm"]
