"""What a user installs: the wheel and sdist carry the licence, the version written once, py.typed, the Python
versions the command line supports; the repository carries no third-party wheels."""

from __future__ import annotations

import email
import glob
import os
import subprocess
import sys
import tarfile
import zipfile

import pytest

from llmpdb.version import __version__

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    pytest.importorskip("setuptools")
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                             "-w", str(out), ROOT], capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    sdist = subprocess.run([sys.executable, "-c", "from setuptools import build_meta as b; import sys; "
                            f"print(b.build_sdist({str(out)!r}))"], cwd=ROOT, capture_output=True, text=True,
                           timeout=240)
    assert sdist.returncode == 0, sdist.stderr
    return glob.glob(str(out / "*.whl"))[0], glob.glob(str(out / "*.tar.gz"))[0]


def test_the_wheel_carries_licence_version_and_typing(built):
    wheel, _ = built
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = email.message_from_bytes(z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))))
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "llmpdb/py.typed" in names
    assert meta["License-Expression"] == "MIT"
    assert meta["Version"] == __version__
    assert meta["Requires-Python"] == ">=3.11"
    assert "Programming Language :: Python :: 3.13" in meta.get_all("Classifier")
    assert not [n for n in names if n.startswith(("tests/", "bench/")) or n.endswith(".whl")]


def test_the_sdist_carries_the_licence(built):
    _, sdist = built
    with tarfile.open(sdist) as t:
        assert any(n.endswith("/LICENSE") for n in t.getnames())


def test_no_third_party_wheels_in_the_repository():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    assert [n for n in tracked if n.endswith((".whl", ".tar.gz", ".sock"))] == []
