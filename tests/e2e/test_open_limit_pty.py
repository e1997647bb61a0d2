"""`python -m llmpdb open FILE` in a real pty, on a file over the size limit: it asks first; `y` opens it
(the tensors mapped, not read), anything else ends with one line and exit status 1."""

from __future__ import annotations

import pytest

from ..cli.saved_files import craft
from .pty_session import ROOT, PtySession

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def big(tmp_path):
    target = tmp_path / "big.safetensors"
    craft(target, {f"w{i}": ("F32", [2**28]) for i in range(2)}, sparse=True)  # 2 GiB claimed, a hole
    return target


def test_over_the_limit_it_asks_and_y_opens(big):
    with PtySession(["-m", "llmpdb", "open", str(big)], env={"PYTHONPATH": ROOT, "LLMPDB_OPEN_MAX_MIB": None}) as s:
        s.child.expect(r"2\.0 GiB of tensors \(a sparse file: .*\) is over the 1024 MiB limit.*Open it\? \[y/N\] ")
        s.child.sendline("y")
        assert "2 tensors (2.0 GiB)" in s.wait_prompt()
        assert s.run("p w1.shape").strip() == "torch.Size([268435456])"
        s.finish("q")
    assert s.exitstatus == 0


def test_over_the_limit_anything_but_y_ends_in_one_line(big):
    with PtySession(["-m", "llmpdb", "open", "--max-mib", "100", str(big)], env={"PYTHONPATH": ROOT}) as s:
        s.child.expect(r"over the 100 MiB limit.*Open it\? \[y/N\] ")
        rest = s.finish("")
    assert rest.strip().splitlines() == ["llmpdb open: big.safetensors: not opened"], rest
    assert s.exitstatus == 1
