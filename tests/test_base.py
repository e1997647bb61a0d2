"""The base debugger class: pdb++ where it imports cleanly, the standard pdb otherwise — automatically."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from llmpdb.base import BASE_FALLBACK_REASON, BASE_NAME, BasePdb, stdlib_pdb

PROBE = textwrap.dedent(
    """
    import sys
    from llmpdb.base import BASE_NAME, BASE_FALLBACK_REASON, stdlib_pdb
    from llmpdb.debugger.core import Pdb
    import pdb
    print(BASE_NAME)
    print(BASE_FALLBACK_REASON)
    print(hasattr(stdlib_pdb, "_ScriptTarget"), pdb.Pdb is not None, Pdb.__mro__[Pdb.__mro__.index(__import__("bdb").Bdb) - 1].__module__)
    """
)


def run_probe(env_update: dict, *, pythonpath_first: str | None = None) -> list[str]:
    env = {**os.environ, **env_update}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath_first, root, env.get("PYTHONPATH")) if p)
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_base_is_a_pdb_class_with_script_targets():
    assert issubclass(BasePdb, stdlib_pdb.Pdb) or BASE_NAME == "pdb++"
    assert hasattr(stdlib_pdb, "_ScriptTarget") and hasattr(stdlib_pdb, "_ModuleTarget")
    assert (BASE_FALLBACK_REASON is None) == (BASE_NAME == "pdb++")


def test_forced_stdlib_base():
    lines = run_probe({"LLMPDB_BASE": "stdlib"})
    assert lines[0] == "pdb"
    assert lines[1] == "LLMPDB_BASE=stdlib"


def test_pdbpp_that_fails_at_import_falls_back_to_stdlib(tmp_path):
    """A pdb++ that raises on import (as 0.12.1 does on CPython 3.13.0) must not break llmpdb."""
    (tmp_path / "pdbpp.py").write_text("raise AttributeError(\"module 'pdb' has no attribute 'itertools'\")\n")
    lines = run_probe({"LLMPDB_BASE": ""}, pythonpath_first=str(tmp_path))
    assert lines[0] == "pdb"
    assert lines[1] == "pdb++ unavailable: AttributeError: module 'pdb' has no attribute 'itertools'"
    assert lines[2].startswith("True True")


def test_hijacked_pdb_module_that_fails_to_import_is_replaced_by_the_stdlib_one(tmp_path):
    """With pdb++'s path hack, even ``import pdb`` fails on 3.13.0; llmpdb loads the standard file."""
    (tmp_path / "pdb.py").write_text("raise AttributeError(\"module 'pdb' has no attribute 'itertools'\")\n")
    (tmp_path / "pdbpp.py").write_text("import pdb  # raises, as the hijacking pdb++ does\n")
    lines = run_probe({"LLMPDB_BASE": ""}, pythonpath_first=str(tmp_path))
    assert lines[0] == "pdb"
    assert lines[1].startswith("pdb++ unavailable: AttributeError")
    assert lines[2] == "True True pdb"


@pytest.mark.skipif(BASE_NAME != "pdb++", reason=f"pdb++ not usable here: {BASE_FALLBACK_REASON}")
def test_pdbpp_base_when_it_imports():
    lines = run_probe({"LLMPDB_BASE": ""})
    assert lines[0] == "pdb++"
    assert lines[1] == "None"
