"""``catch RuntimeError`` set at a script's first line does not stop inside ``import numpy`` (numpy's import
raises and handles RuntimeErrors in its own code), and still stops at the user's own raise."""

from __future__ import annotations

import pytest

from .pty_session import PtySession

SCRIPT = '''\
import numpy

try:
    raise RuntimeError("the user's own")
except RuntimeError:
    pass
print("finished", numpy.__name__)
'''


def test_catch_skips_a_library_import_and_stops_at_the_users_raise(tmp_path):
    pytest.importorskip("numpy")
    script = tmp_path / "uses_numpy.py"
    script.write_text(SCRIPT)
    with PtySession(["-m", "llmpdb", str(script)], timeout=40, width=100) as s:
        s.wait_prompt()
        assert "catch 1: RuntimeError" in s.run("catch RuntimeError")
        stop = s.run("c")
        assert "RuntimeError: the user's own" in stop, stop
        assert "uses_numpy.py(4)" in stop and "numpy/" not in stop, stop
        assert "finished numpy" in s.finish("c")
