"""``ide``'s address rule and attach configuration (``llmpdb.commands.ide_config``), and its refusals at a
stop that cannot be handed over (in process: the hand-off itself is tests/e2e/test_ide_pty.py)."""

from __future__ import annotations

import io
import json
import sys

import pytest

from llmpdb.commands.ide_config import attach_instructions, is_loopback, parse_listen_address
from llmpdb.debugger.core import Pdb
from llmpdb.session import SESSION


@pytest.mark.parametrize("text, expected", [
    ("", ("127.0.0.1", 0)), ("5678", ("127.0.0.1", 5678)), ("127.0.0.1:0", ("127.0.0.1", 0)),
    ("localhost:5678", ("localhost", 5678)), ("[::1]:5678", ("::1", 5678)), ("127.0.0.2:9", ("127.0.0.2", 9)),
])
def test_loopback_addresses(text, expected):
    assert parse_listen_address(text) == expected


@pytest.mark.parametrize("text", ["0.0.0.0:5678", "10.1.2.3:5678", "node3:5678", "[::]:5678"])
def test_other_hosts_need_listen_public(text):
    with pytest.raises(ValueError, match="not loopback.*ssh -L.*--listen-public"):
        parse_listen_address(text)
    assert parse_listen_address(text, public=True)[1] == 5678


@pytest.mark.parametrize("text", ["65536", "-1", "5e3", "²", "x:", ":5678", "a b:5678", "1" * 40])
def test_bad_addresses_are_one_line_errors(text):
    with pytest.raises(ValueError) as info:
        parse_listen_address(text)
    assert "\n" not in str(info.value)


def test_loopback_is_decided_without_resolving_names():
    assert is_loopback("localhost") and is_loopback("::1") and not is_loopback("localhost.evil.example")


def test_the_vs_code_configuration_is_an_attach_entry():
    lines = attach_instructions("127.0.0.1", 5678, cwd="/srv/job")
    start = lines.index("{")
    end = lines.index("}", start)
    config = json.loads("\n".join(lines[start:end + 1]))
    assert config["type"] == "debugpy" and config["request"] == "attach"
    assert config["connect"] == {"host": "127.0.0.1", "port": 5678} and config["justMyCode"] is False
    assert config["pathMappings"] == [{"localRoot": "${workspaceFolder}", "remoteRoot": "/srv/job"}]
    assert any(line.startswith("PyCharm: ") for line in lines)
    assert any("ssh -N -L 5678:127.0.0.1:5678 " in line for line in lines)


def _debugger():
    out = io.StringIO()
    return Pdb(stdout=out, width=100), out


def test_without_debugpy_one_line_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "debugpy", None)
    pdb, out = _debugger()
    pdb.do_ide("")
    assert out.getvalue().strip() == "*** ide: debugpy is not installed in this environment: pip install debugpy"


@pytest.mark.parametrize("arg, message", [
    ("0.0.0.0:5678", "0.0.0.0 is not loopback"), ("1 2", "usage: ide"), ("--timeout nan", "bad value for --timeout"),
    ("--timeout -1", "bad value for --timeout"),
])
def test_bad_arguments_change_nothing(arg, message):
    pdb, out = _debugger()
    pdb.do_ide(arg)
    assert message in out.getvalue()
    assert SESSION.stood_down == "" and "address" not in SESSION.memory("ide", dict)


def test_a_post_mortem_stop_is_refused():
    pdb, out = _debugger()
    try:
        raise ValueError("boom")
    except ValueError as exc:
        pdb.setup(None, exc.__traceback__)
    pdb.do_ide("")
    assert "post-mortem stop" in out.getvalue()


def test_a_thread_waiting_its_turn_when_llmpdb_stands_down_does_not_stop(monkeypatch):
    """A thread queued at the stop gate behind the stop that ran ``ide`` must not install llmpdb's trace
    function in the program debugpy now traces: it frees the gate and runs on."""
    import threading

    from llmpdb import hooks
    from llmpdb.breakpoints.stop_gate import STOP_GATE

    traced = []
    STOP_GATE.reserve()  # this thread's stop is open

    def worker():
        hooks._stop(sys._getframe(), None)
        traced.append(sys.gettrace())

    # get_debugger runs before reserve: give the worker a debugger-like object whose set_trace must not run
    monkeypatch.setattr(hooks, "get_debugger", lambda **kw: type("D", (), {
        "set_trace": lambda self, frame: pytest.fail("set_trace ran after the stand-down")})())
    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(0.3)
    assert thread.is_alive()  # queued behind this thread's stop
    monkeypatch.setattr(SESSION, "stood_down", "debugpy")
    STOP_GATE.enter()
    STOP_GATE.leave()
    thread.join(5)
    assert not thread.is_alive() and traced == [None] and STOP_GATE.owner is None
