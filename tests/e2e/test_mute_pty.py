"""``mute HERE`` skips a ``breakpoint()`` inside a loop for the rest of the run, in a real pty, both bases;
the other site still stops, and ``unmute`` brings the loop's back."""

from __future__ import annotations

import pytest

from .pty_session import PtySession

BASES = pytest.mark.parametrize("base_env", [{}, {"LLMPDB_BASE": "stdlib"}], ids=["pdb++", "stdlib-pdb"])

LOOP = """\
for step in range(4):
    breakpoint()
    print(f"step {step} ran")
breakpoint()
print("loop done")
"""


@BASES
def test_mute_here_skips_a_breakpoint_inside_a_loop(base_env, tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    with PtySession(["-m", "llmpdb", "-c", "continue", str(script)], env=base_env, timeout=60) as s:
        first = s.wait_prompt()
        assert "loop.py(3)<module>()" in first
        assert s.run("p step").strip() == "0"
        assert "muted breakpoint() at loop.py:2 for the rest of the run" in s.run("mute HERE")
        after = s.run("c")  # steps 0-3 run without stopping; the stop is the second site
        assert [f"step {n} ran" in after for n in range(4)] == [True] * 4
        assert "loop.py(5)<module>()" in after
        rest = s.finish("c")
    assert "loop done" in rest and s.exitstatus == 0


@BASES
def test_unmute_brings_the_site_back(base_env, tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    with PtySession(["-m", "llmpdb", "-c", "continue", str(script)], env=base_env, timeout=60) as s:
        s.wait_prompt()
        s.run("mute")
        s.run("unmute")
        second = s.run("c")
        assert "step 0 ran" in second and "step 1 ran" not in second and "loop.py(3)<module>()" in second
        s.run("mute")
        rest = s.finish("c")
    assert "step 3 ran" in rest and "loop done" in rest
