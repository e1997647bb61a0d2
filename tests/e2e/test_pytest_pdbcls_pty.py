"""``pytest --pdb --pdbcls=llmpdb:Pdb`` and ``pytest --trace --pdbcls=llmpdb:Pdb`` open llmpdb, in a real pty,
on a failing test written to tmp_path; both debugger bases."""

from __future__ import annotations

import textwrap

import pytest

from .pty_session import ROOT, PtySession

BASES = pytest.mark.parametrize("base_env", [{}, {"LLMPDB_BASE": "stdlib"}], ids=["pdb++", "stdlib-pdb"])

FAILING_TEST = textwrap.dedent("""
    import torch

    def test_projection():
        hidden = torch.zeros(2, 5, 8)
        weight = torch.zeros(4, 3)
        out = hidden @ weight
        assert out.shape == (2, 5, 3)
""")


def _pytest_args(tmp_path, mode: str) -> list[str]:
    (tmp_path / "test_projection.py").write_text(FAILING_TEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    return ["-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), "-c",
            str(tmp_path / "pytest.ini"), mode, "--pdbcls=llmpdb:Pdb", str(tmp_path / "test_projection.py")]


def _rows(text: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split()[1:] for line in text.splitlines() if line.split()}


@BASES
def test_pytest_pdb_opens_llmpdb_post_mortem(base_env, tmp_path):
    env = {"PYTHONPATH": ROOT, **base_env}
    with PtySession(_pytest_args(tmp_path, "--pdb"), env=env, timeout=90) as s:
        first = s.wait_prompt()
        assert "RuntimeError: mat1 and mat2 shapes cannot be multiplied (10x8 and 4x3)" in first
        assert "test_projection.py(7)test_projection()" in first  # the failing line, post-mortem
        rows = _rows(s.run("shapes"))
        assert rows["hidden"][:4] == ["(2,", "5,", "8)", "f32"]
        assert rows["weight"][:3] == ["(4,", "3)", "f32"]
        assert "shapes [EXPR] [--stats]" in s.run("help shapes")
        rest = s.finish("c")
    assert "1 failed" in rest


@BASES
def test_pytest_trace_opens_llmpdb_at_the_test_start(base_env, tmp_path):
    env = {"PYTHONPATH": ROOT, **base_env}
    with PtySession(_pytest_args(tmp_path, "--trace"), env=env, timeout=90) as s:
        first = s.wait_prompt()
        assert "test_projection.py(5)test_projection()" in first
        assert "no tensors" in s.run("shapes")
        s.run("n")
        s.run("n")
        table = s.run("shapes")
        assert {"hidden", "weight"} <= set(_rows(table)) and "2 tensors, 368 B total" in table
        rest = s.finish("c")
    assert "1 failed" in rest
