"""A model defined in the script being debugged (nanoGPT style), through ``python -m llmpdb`` in a real pty.

On 3.11 the default engine compiles the script with guarded hooks (``llmpdb.breakpoints.guards``): its code
objects, the model's ``forward`` among them, must stay hashable, or ``stack-model``, ``explain``, the path
line and module-breakpoint naming (which look code objects up) fail. Both engines must read the same.
A checkout in a folder named ``llmpdb/`` (``git clone``) must not hide the user's frames as llmpdb's own."""

from __future__ import annotations

import os
import shutil

import pytest

from .pty_session import PtySession

HERE = os.path.dirname(os.path.abspath(__file__))
ENGINES = pytest.mark.parametrize("engine_env", [{}, {"LLMPDB_FAST_BREAKPOINTS": "0"}], ids=["default", "traced"])


def _session_checks(script: str, engine_env: dict) -> None:
    with PtySession(["-m", "llmpdb", script], env=engine_env, timeout=40, width=140) as s:
        s.wait_prompt()
        assert "Breakpoint 1 at" in s.run("b 17")
        stop = s.run("c")
        assert "internal error" not in stop and "failed" not in stop, stop
        assert "path: eval, grad | blocks.0 (Block)" in stop
        out = s.run("stack-model")
        assert "internal error" not in out, out
        assert " #2  <module>()              train.py:45" in out and " #3  main()                  train.py:40" in out
        assert "(root)         TinyGPT  train.py:32  idx (2, 7) i64" in out
        assert ">#9  blocks.0       Block    train.py:17  x (2, 7, 32) f32" in out
        out = s.run("explain q @ k")
        assert "internal error" not in out, out
        assert "from blocks.0.qkv (Linear) → view → permute" in out
        assert "mismatch: q dim 3 (8) vs k dim 2 (7 seq)" in out
        out = s.run("bm blocks.1")
        assert "module breakpoint 1: blocks.1" in out and "internal error" not in out, out
        stop = s.run("c")
        assert "module breakpoint 1: blocks.1 (Block), hit 1" in stop, stop
        assert "path: eval, grad | blocks.1 (Block)" in stop
        assert "blocks.1 (Block)" in s.run("c")  # the line breakpoint, in the second block
        rest = s.finish("c")
        assert "done (2, 7, 50)" in rest


@ENGINES
def test_script_defined_model(tmp_path, engine_env):
    script = tmp_path / "train.py"
    shutil.copy(os.path.join(HERE, "script_model.py"), script)
    _session_checks(str(script), engine_env)


@ENGINES
def test_script_in_a_folder_named_llmpdb(tmp_path, engine_env):
    folder = tmp_path / "llmpdb"
    folder.mkdir()
    script = folder / "train.py"
    shutil.copy(os.path.join(HERE, "script_model.py"), script)
    _session_checks(str(script), engine_env)
