"""The foundation tour on examples/infer.py, typed into a real terminal."""

from __future__ import annotations

import pytest

from .pty_session import PtySession

pytestmark = pytest.mark.timeout(180)


def _rows(text: str) -> dict[str, list[str]]:
    """Table rows by their first cell (the access path)."""
    rows = {}
    for line in text.splitlines():
        cells = line.split()
        if cells:
            rows[cells[0]] = cells[1:]
    return rows


def test_python_m_llmpdb_shapes_tour():
    with PtySession(["-m", "llmpdb", "examples/infer.py"]) as s:
        first = s.wait_prompt()
        assert "examples/infer.py(1)<module>()" in first

        stop1 = s.run("c")
        assert "infer.py(35)main()" in stop1  # the line after the first breakpoint()
        table = s.run("shapes")
        rows = _rows(table)
        assert " ".join(rows["inputs['input_ids']"]) == "(1, 7) i64 56 B batch · seq"
        assert " ".join(rows["inputs['attention_mask']"]) == "(1, 7) i64 56 B batch · seq"
        assert "2 tensors, 112 B total" in table
        only_inputs = s.run("shapes inputs")
        assert "inputs['input_ids']" in only_inputs and "model" not in _rows(only_inputs)

        s.run("c")
        stop3 = s.run("c")
        assert "logits = outputs.logits" in stop3
        rows = _rows(s.run("shapes"))
        assert rows["outputs.logits"][:4] == ["(1,", "7,", "384)", "f32"]
        assert rows["outputs.cache.layers[1].keys"][:5] == ["(1,", "2,", "7,", "16)", "f32"]
        assert rows["outputs.cache.layers[1].keys"][-7:] == ["batch", "·", "kv_heads", "·", "seq", "·",
                                                             "head_dim"]

        stats = s.run("shapes --stats")
        header = stats.splitlines()[0].split()
        assert header[-5:] == ["min", "max", "mean", "std", "dims"]  # --stats keeps the dims column
        mask = _rows(stats)["inputs['attention_mask']"]
        assert mask[-5:] == ["1", "1", "1", "0", "batch·seq"]  # an all-ones mask: min 1, max 1, mean 1, std 0

        assert s.run("help shapes").startswith("shapes [EXPR] [--stats]")
        assert s.run("help stack-model").startswith("stack-model")
        assert "SyntaxError" in s.run("foo bar")
        assert "NameError: name 'nosuch' is not defined" in s.run("shapes nosuch")
        assert "*** " in s.run("p inputs[")

        rest = s.finish("c")
    assert "done" in rest and "llmpdb: the program finished" in rest
    assert s.exitstatus == 0


@pytest.mark.parametrize("base_env", [{}, {"LLMPDB_BASE": "stdlib"}], ids=["pdb++", "stdlib-pdb"])
def test_pythonbreakpoint_llmpdb_set_trace(base_env):
    env = {"PYTHONBREAKPOINT": "llmpdb.set_trace", **base_env}
    with PtySession(["examples/infer.py"], env=env) as s:
        stop1 = s.wait_prompt()
        assert "infer.py(35)main()" in stop1
        rows = _rows(s.run("shapes inputs"))
        assert rows["inputs['input_ids']"][:3] == ["(1,", "7)", "i64"]
        s.run("c")
        s.run("c")
        rows = _rows(s.run("shapes outputs"))
        assert rows["outputs.logits"][:4] == ["(1,", "7,", "384)", "f32"]
        rest = s.finish("c")
    assert "done" in rest
    assert s.exitstatus == 0


def test_demo_without_a_terminal_runs_the_tour_and_exits():
    import os
    import subprocess
    import sys

    from .pty_session import ROOT

    env = {**os.environ, "NO_COLOR": "1"}
    result = subprocess.run([sys.executable, "-m", "llmpdb", "examples/infer.py"], cwd=ROOT, env=env,
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=150)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("(llmpdb tour) shapes") == 3  # one per breakpoint(), none at line 1
    assert "outputs.logits" in result.stdout
    assert "done" in result.stdout


@pytest.mark.parametrize("base_env", [{}, {"LLMPDB_BASE": "stdlib"}], ids=["pdb++", "stdlib-pdb"])
def test_tab_completes_hyphenated_commands(base_env):
    with PtySession(["-m", "llmpdb", "examples/infer.py"], env=base_env) as s:
        s.wait_prompt()
        s.child.send("help stack-\t")
        s.child.expect_exact("model")  # typed keys echo one by one; "model" is what completion added
        out = s.run("")
        assert "stack-model [--all]" in out
        s.child.send("break-m\t")
        s.child.expect_exact("odule")
        listing = s.run("")
        assert "num  pattern" in listing or "no module breakpoints" in listing
        s.finish("q")
