"""After ``pip install llmpdb`` the user's other debuggers behave as before, in a real pty: ``ipdb.set_trace()``,
IPython 9's ``%debug`` and ``%pdb on``, plain ``pdb`` and ``pytest --pdb``, with llmpdb imported and its
debugger class built (on pdb++ where pdb++ imports). The child runs as a user's environment does without
pdb++'s ``import pdb`` hijack (``user_env.py``: ``python -S``, no ``.pth`` file processed); with the hijack,
ipdb and ``%debug`` die on IPython 9 (``property '_curframe_locals' of 'Pdb' object has no setter``)."""

from __future__ import annotations

import re
import textwrap

import pexpect
import pytest

from .pty_session import PtySession, clean
from .user_env import user_python

IN_PROMPT = re.compile(r"In \[\d+\]: ")
IPDB = re.compile(r"ipdb>")  # IPython 9 draws it with prompt_toolkit: cursor moves follow
IPYTHON_ARGS = ["-m", "IPython", "--quick", "--no-banner", "--colors=nocolor", "--simple-prompt",
                "--HistoryManager.enabled=False", "--TerminalInteractiveShell.autoindent=False"]


def _ipython9():
    ipython = pytest.importorskip("IPython", reason="IPython is not installed for this Python")
    if int(ipython.__version__.split(".")[0]) < 9:
        pytest.skip(f"IPython {ipython.__version__}: the test extra installs IPython 9")


def _expect(child, pattern) -> str:
    child.expect(pattern)
    return clean(child.before)


@pytest.mark.timeout(120)
def test_ipdb_set_trace_works_beside_llmpdb(tmp_path):
    _ipython9()
    pytest.importorskip("ipdb", reason="ipdb is not installed (the test extra installs it)")
    script = tmp_path / "uses_ipdb.py"
    script.write_text(textwrap.dedent("""
        import llmpdb, llmpdb.debugger.core   # llmpdb imported, its debugger class built
        import ipdb
        x = 41
        ipdb.set_trace()
        print("after", x + 1)
    """))
    args, env = user_python([str(script)], {"IPYTHONDIR": str(tmp_path)})
    with PtySession(args, env=env, timeout=60) as s:
        child = s.child
        first = _expect(child, IPDB)
        assert "AttributeError" not in first and "uses_ipdb.py" in first, first
        child.sendline("p x * 1000 + 1")
        child.expect("41001")  # the value: prompt_toolkit redraws the prompt, the echo never shows it
        child.expect(IPDB)
        child.sendline("c")
        child.expect(pexpect.EOF)
        assert "after 42" in clean(child.before)


@pytest.mark.timeout(120)
def test_ipython_debug_and_pdb_on_open_ipythons_debugger_beside_llmpdb(tmp_path):
    _ipython9()
    args, env = user_python(IPYTHON_ARGS, {"IPYTHONDIR": str(tmp_path)})
    with PtySession(args, env=env, timeout=60) as s:
        child = s.child
        child.expect(IN_PROMPT)
        child.sendline("import llmpdb, llmpdb.debugger.core, pdb; print(pdb.__file__)")
        assert "_pdbpp_path_hack" not in _expect(child, IN_PROMPT)
        child.sendline("def fail(x): return x / 0")
        child.expect(IN_PROMPT)
        child.sendline("fail(7)")
        assert "ZeroDivisionError" in _expect(child, IN_PROMPT)
        child.sendline("%debug")
        first = _expect(child, IPDB)
        assert "AttributeError" not in first and "fail" in first, first
        child.sendline("p x * 1000 + 1")
        child.expect("7001")
        child.expect(IPDB)
        child.sendline("q")
        child.expect(IN_PROMPT)
        child.sendline("%pdb on")
        child.expect(IN_PROMPT)
        child.sendline("fail(9)")
        first = _expect(child, IPDB)
        assert "ZeroDivisionError" in first and "AttributeError" not in first, first
        child.sendline("p x * 1000 + 1")
        child.expect("9001")
        child.expect(IPDB)
        child.sendline("q")
        child.expect(IN_PROMPT)
        child.sendline("exit")
        child.expect(pexpect.EOF)


@pytest.mark.timeout(120)
def test_plain_pdb_is_the_standard_library_one(tmp_path):
    script = tmp_path / "uses_pdb.py"
    script.write_text("import llmpdb, llmpdb.debugger.core\nimport pdb\nx = 5\npdb.set_trace()\nprint('ran', x)\n")
    args, env = user_python([str(script)])
    with PtySession(args, env=env, timeout=60) as s:
        child = s.child
        _expect(child, re.compile(r"\(Pdb\) "))
        child.sendline("p pdb.__file__")
        where = _expect(child, re.compile(r"\(Pdb\) "))
        assert "_pdbpp_path_hack" not in where and "pdb.py" in where, where
        child.sendline("c")
        child.expect(pexpect.EOF)
        assert "ran 5" in clean(child.before)


@pytest.mark.timeout(120)
def test_pytest_pdb_opens_the_standard_pdb(tmp_path):
    (tmp_path / "test_it.py").write_text("def test_it():\n    x = 3\n    assert x == 4\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    args, env = user_python(["-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), "-c",
                             str(tmp_path / "pytest.ini"), "--pdb", str(tmp_path / "test_it.py")])
    with PtySession(args, env=env, timeout=60) as s:
        child = s.child
        first = _expect(child, re.compile(r"\(Pdb\) "))
        assert "assert 3 == 4" in first, first
        child.sendline("p x")
        assert "3" in _expect(child, re.compile(r"\(Pdb\) "))
        child.sendline("c")
        child.expect(pexpect.EOF)
        assert "1 failed" in clean(child.before)
