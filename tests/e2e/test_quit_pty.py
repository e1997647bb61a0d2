"""``q`` and the other run-control words at the prompt, in a real terminal, on both bases.

Every attention forward has a local ``q``: typing ``q`` there printed the tensor on the pdb++ base (its
"smart command" parsing evaluates a bare word that names a variable); now ``q``, ``c``, ``n``... are the
commands on both bases, and ``p q`` / ``!q`` show the variable. ``q`` at a stop opened by ``breakpoint()``
with ``PYTHONBREAKPOINT=llmpdb.set_trace`` printed a ``BdbQuit`` traceback through llmpdb's frames; now
the program ends (its ``finally`` blocks run), says ``llmpdb: quit`` and exits with status 1.
"""

from __future__ import annotations

import pytest

from .pty_session import ROOT, PtySession

pytestmark = pytest.mark.timeout(180)

BASES = [pytest.param({}, id="pdbpp"), pytest.param({"LLMPDB_BASE": "stdlib"}, id="stdlib")]

ATTENTION = """\
def attention(step):
    q = 11 + step
    c = 22
    n = 33
    s = 44
    import llmpdb; llmpdb.set_trace()
    done = step + 1
    print("after", step, q, c, n, s)
    return q

attention(0)
attention(1)
print("finished")
"""

BREAKPOINT = """\
def work():
    total = 5
    try:
        breakpoint()
        print("after the stop")
    finally:
        print("cleanup ran")

work()
print("finished")
"""


@pytest.mark.parametrize("base", BASES)
def test_run_control_words_are_commands_even_with_locals_of_that_name(tmp_path, base):
    script = tmp_path / "attention.py"
    script.write_text(ATTENTION)
    with PtySession(["-m", "llmpdb", str(script)], env={"PYTHONPATH": ROOT, **base}, timeout=60) as s:
        s.wait_prompt()
        s.run("c")  # to the stop inside attention(0)
        assert s.run("p q").strip() == "11"
        assert s.run("!q").strip() == "11"
        assert s.run("p c + n + s").strip() == "99"
        if not base:  # pdb++: an expression that starts with the name is still one (pdb's quits)
            assert s.run("q+1").strip() == "12"
        stepped = s.run("n")
        assert "after 0" not in stepped and "-> print(" in stepped  # n stepped: nothing printed yet
        went_on = s.run("s")
        assert "after 0 11 22 33 44" in went_on  # s ran the print line
        on_to_next = s.run("c")
        assert "after 0" not in on_to_next and "-> done = step + 1" in on_to_next
        assert s.run("p q").strip() == "12"  # the stop inside attention(1)
        tail = s.finish("q")
        assert "finished" not in tail and "after 1" not in tail
        assert "llmpdb: quit" in tail
        assert s.exitstatus == 0


@pytest.mark.parametrize("base", BASES)
def test_quit_at_a_breakpoint_hook_stop_ends_the_program_quietly(tmp_path, base):
    script = tmp_path / "work.py"
    script.write_text(BREAKPOINT)
    env = {"PYTHONPATH": ROOT, "PYTHONBREAKPOINT": "llmpdb.set_trace", **base}
    with PtySession([str(script)], env=env, timeout=60) as s:
        s.wait_prompt()
        assert s.run("p total").strip() == "5"
        tail = s.finish("q")
    assert "Traceback" not in tail and "BdbQuit" not in tail, tail
    assert "cleanup ran" in tail  # the program's finally blocks run, as pdb's quit lets them
    assert "after the stop" not in tail and "finished" not in tail
    assert "llmpdb: quit" in tail
    assert s.exitstatus == 1
