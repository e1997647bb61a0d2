"""The pytest plugin in a real pty, on a test file generated in tmp_path: ``pytest --llmpdb`` (loaded from the
``pytest11`` entry point pyproject.toml declares) opens llmpdb post-mortem, ``--llmpdb-trace`` at the test's
start; ``breakpoint()`` in a test under ``PYTHONBREAKPOINT=llmpdb.set_trace`` opens llmpdb with capture on
(it died on ``OSError: pytest: reading from stdin while output is captured!``); ``shapes`` hides pytest's
``@py_assert*`` temporaries."""

from __future__ import annotations

import os
import re
import textwrap
import tomllib

import pytest

from .pty_session import ROOT, PtySession

BASES = pytest.mark.parametrize("base_env", [{}, {"LLMPDB_BASE": "stdlib"}], ids=["pdb++", "stdlib-pdb"])

FAILING_TEST = textwrap.dedent("""
    import torch

    def test_projection():
        hidden = torch.zeros(2, 5, 8)
        weight = torch.zeros(8, 3)
        out = hidden @ weight
        assert out.sum() == torch.ones(1).sum()
""")

BREAKPOINT_TEST = textwrap.dedent("""
    import torch

    def test_stops_inside():
        hidden = torch.zeros(2, 3)
        print("printed before the stop")
        breakpoint()
        print("printed after the stop")
        assert hidden.sum() == 0
""")


def _entry_point_dir(tmp_path) -> str:
    """A distribution on ``sys.path`` declaring pyproject.toml's ``pytest11`` entry points, as an install does."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        entries = tomllib.load(f)["project"]["entry-points"]["pytest11"]
    dist = tmp_path / "site" / "llmpdb_plugin_probe-0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: llmpdb-plugin-probe\nVersion: 0\n")
    (dist / "entry_points.txt").write_text("[pytest11]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()))
    return str(tmp_path / "site")


def _pytest(tmp_path, source: str, *options: str) -> list[str]:
    (tmp_path / "test_generated.py").write_text(source)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    return ["-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), "-c",
            str(tmp_path / "pytest.ini"), *options, str(tmp_path / "test_generated.py")]


def _rows(text: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split()[1:] for line in text.splitlines() if line.split()}


@BASES
def test_llmpdb_option_opens_llmpdb_post_mortem_and_shapes_hides_assert_temporaries(base_env, tmp_path):
    env = {"PYTHONPATH": os.pathsep.join([ROOT, _entry_point_dir(tmp_path)]), **base_env}
    with PtySession(_pytest(tmp_path, FAILING_TEST, "--llmpdb"), env=env, timeout=90) as s:
        first = s.wait_prompt()
        assert "test_generated.py(8)test_projection()" in first, first
        table = s.run("shapes")
        rows = _rows(table)
        assert {"hidden", "weight", "out"} <= set(rows), table
        assert "@py_assert" not in table, table
        assert "@py_assert" in s.run("p sorted(locals())")  # they are there: shapes leaves them out
        rest = s.finish("c")
    assert "1 failed" in rest


@BASES
def test_llmpdb_trace_option_stops_at_the_test_start(base_env, tmp_path):
    env = {"PYTHONPATH": os.pathsep.join([ROOT, _entry_point_dir(tmp_path)]), **base_env}
    with PtySession(_pytest(tmp_path, FAILING_TEST, "--llmpdb-trace"), env=env, timeout=90) as s:
        first = s.wait_prompt()
        assert "test_generated.py(5)test_projection()" in first, first
        rest = s.finish("c")
    assert "1 failed" in rest


@BASES
def test_breakpoint_under_pythonbreakpoint_opens_llmpdb_with_capture_on(base_env, tmp_path):
    env = {"PYTHONPATH": ROOT, "PYTHONBREAKPOINT": "llmpdb.set_trace", **base_env}
    with PtySession(_pytest(tmp_path, BREAKPOINT_TEST), env=env, timeout=90) as s:
        first = s.wait_prompt()
        assert "OSError" not in first and "test_generated.py(8)test_stops_inside()" in first, first
        assert re.search(r"^hidden\s+\(2, 3\)\s+f32", s.run("shapes"), re.M)
        assert "42" in s.run("p 6 * 7")
        rest = s.finish("c")
    assert "1 passed" in rest, rest
    assert "printed after the stop" not in rest  # capture is back on once the test runs on


def test_breakpoint_under_the_llmpdb_option_opens_llmpdb_through_pytests_wrapper(tmp_path):
    env = {"PYTHONPATH": os.pathsep.join([ROOT, _entry_point_dir(tmp_path)]), "PYTHONBREAKPOINT": None}
    with PtySession(_pytest(tmp_path, BREAKPOINT_TEST, "--llmpdb"), env=env, timeout=90) as s:
        first = s.wait_prompt()
        assert "test_generated.py(8)test_stops_inside()" in first, first
        assert re.search(r"^hidden\s+\(2, 3\)\s+f32", s.run("shapes"), re.M)
        rest = s.finish("c")
    assert "1 passed" in rest, rest
