"""``pip install llmpdb`` installs no pdb hijacker: pdb++ is the optional extra ``llmpdb[pdbpp]``; the test
extra keeps pdb++ (both bases are tested), ipdb and a current IPython 9; the pytest plugin is declared."""

from __future__ import annotations

import os
import re
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HIJACKERS = {"pdbpp", "pdbp", "pdbpp-hijack"}  # distributions whose install replaces `import pdb`


def _project() -> dict:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[(]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_default_dependencies_hold_no_pdb_hijacker():
    names = {_name(r) for r in _project()["dependencies"]}
    assert not names & HIJACKERS, names


def test_pdbpp_is_an_extra_and_the_test_extra_keeps_both_bases_and_the_user_debuggers():
    extras = _project()["optional-dependencies"]
    assert {_name(r) for r in extras["pdbpp"]} == {"pdbpp"}
    test = {_name(r): r for r in extras["test"]}
    assert {"pdbpp", "ipdb", "ipython", "pytest", "pexpect"} <= set(test)
    assert re.search(r"ipython>=9\b", test["ipython"]), test["ipython"]


def test_the_pytest_plugin_is_declared_and_importable():
    entry = _project()["entry-points"]["pytest11"]
    assert entry == {"llmpdb": "llmpdb.hosts.pytest_plugin"}
    import importlib

    plugin = importlib.import_module(entry["llmpdb"])
    assert callable(plugin.pytest_addoption) and callable(plugin.pytest_configure)


def test_the_built_wheel_requires_no_hijacker_and_registers_the_plugin(tmp_path):
    """What pip reads: the wheel's METADATA names pdb++ only under an extra; entry_points.txt has pytest11."""
    import email
    import glob
    import subprocess
    import sys
    import zipfile

    import pytest

    pytest.importorskip("setuptools")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                            str(tmp_path), ROOT], capture_output=True, text=True, timeout=240)
    assert built.returncode == 0, built.stderr
    with zipfile.ZipFile(glob.glob(str(tmp_path / "*.whl"))[0]) as z:
        names = z.namelist()
        meta = email.message_from_bytes(z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))))
        entry_points = z.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    requires = meta.get_all("Requires-Dist")
    unconditional = [r for r in requires if "extra ==" not in r]
    assert not {_name(r) for r in unconditional} & HIJACKERS, unconditional
    assert any(_name(r) == "pdbpp" and "extra == \"pdbpp\"" in r for r in requires), requires
    assert "[pytest11]\nllmpdb = llmpdb.hosts.pytest_plugin" in entry_points, entry_points
