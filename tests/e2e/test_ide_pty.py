"""``ide`` hands a paused program to an IDE: in a real pty, ``python -m llmpdb`` stops at ``breakpoint()``,
``ide`` starts debugpy on loopback, and a DAP client (tests/e2e/dap_client.py, what VS Code sends) attaches
over a real socket: it sees the same stop (frame and line, before the line ran), steps, reads a variable,
stops at the next ``breakpoint()`` (llmpdb has stood down: debugpy's hook now), and the program ends."""

from __future__ import annotations

import json
import re

import pexpect
import pytest

from .dap_client import DapClient
from .pty_session import PtySession, clean

pytest.importorskip("debugpy")

SCRIPT = """\
def work(n):
    total = 0
    for i in range(n):
        total += i
    return total

a = 1
breakpoint()
b = a + 1
c = work(4)
print("b", b, "c", c)
breakpoint()
print("done", a + b + c)
"""


def _top(dap: DapClient, thread: int) -> tuple[str, int, str]:
    frame = dap.request("stackTrace", {"threadId": thread})["stackFrames"][0]
    return frame["source"]["path"], frame["line"], frame["name"]


def test_ide_hands_the_stop_to_a_dap_client(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    with PtySession(["-m", "llmpdb", "-c", "continue", str(script)], env={"LLMPDB_BASE": "stdlib"},
                    timeout=20) as s:
        assert "job.py(9)<module>()" in s.wait_prompt()
        s.run("b 4")  # inside work(), which runs after the hand-off: llmpdb must not stop there any more
        s.child.sendline("ide --timeout 15")
        s.child.expect(r"waiting 15 s for the IDE")
        said = clean(s.child.before)
        port = int(re.search(r"debugpy listens on 127\.0\.0\.1:(\d+)", said).group(1))
        config = json.loads(said[said.index("{"):said.index("\n}\n") + 2])
        assert config["request"] == "attach" and config["connect"] == {"host": "127.0.0.1", "port": port}
        assert config["justMyCode"] is False and f"ssh -N -L {port}:127.0.0.1:{port}" in said
        assert "breakpoints cleared (set them in the IDE): job.py:4" in said
        with DapClient("127.0.0.1", port, timeout=10) as dap:
            dap.request("initialize", {"adapterID": "llmpdb-test", "clientID": "llmpdb-test",
                                       "pathFormat": "path", "linesStartAt1": True, "columnsStartAt1": True})
            attach = dap.send("attach", {"justMyCode": False})
            dap.wait_event("initialized")
            dap.request("configurationDone")
            assert dap.response(attach)["success"]
            thread = dap.wait_event("stopped")["threadId"]
            assert _top(dap, thread) == (str(script), 9, "<module>")  # llmpdb's stop, `b = a + 1` not run yet
            s.child.expect("the IDE attached; it shows this stop now")
            dap.request("next", {"threadId": thread})
            assert dap.wait_event("stopped")["reason"] == "step"
            assert _top(dap, thread)[1] == 10
            frame_id = dap.request("stackTrace", {"threadId": thread})["stackFrames"][0]["id"]
            assert dap.request("evaluate", {"expression": "b", "frameId": frame_id})["result"] == "2"
            dap.request("continue", {"threadId": thread})
            dap.wait_event("stopped")  # not at llmpdb's cleared job.py:4; the second breakpoint() stops in the IDE
            assert _top(dap, thread)[1] == 13
            dap.request("continue", {"threadId": thread})
            dap.send("disconnect", {})
            s.child.expect(pexpect.EOF, timeout=15)
        rest = clean(s.child.before)
        s.child.close()
    assert "b 2 c 6" in rest and "done 9" in rest and "(llmpdb)" not in rest
    # debugpy's tracing was never fought over while the program ran (the runner's own sys.settrace(None) at
    # the very end, after the program, is the one warning pydevd prints: docs/remote.md)
    assert "PYDEV DEBUGGER WARNING" not in rest[:rest.index("done 9")]
    assert s.exitstatus == 0


def test_ctrl_c_stops_the_wait_and_the_program_runs_on_under_debugpy(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    with PtySession(["-m", "llmpdb", "-c", "continue", str(script)], timeout=20) as s:
        s.wait_prompt()
        s.child.sendline("ide --timeout 60")
        s.child.expect(r"waiting 60 s for the IDE")
        s.child.sendintr()
        s.child.expect("stopped waiting: the program continues under debugpy, which keeps listening")
        s.child.expect(pexpect.EOF, timeout=15)  # the second breakpoint() is debugpy's now: no IDE, no stop
        rest = clean(s.child.before)
        s.child.close()
    assert "b 2 c 6" in rest and "done 9" in rest and "(llmpdb)" not in rest
    assert s.exitstatus == 0
