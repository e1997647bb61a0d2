"""Remote attach against hostile peers and settings, as a batch job sees them (issue 21).

Every job is a real ``python`` subprocess without a terminal (``tests/e2e/test_remote.py``'s ``Job``); every
peer is a real socket or a real ``python -m llmpdb attach``. The job must finish with its own result: a peer's
bytes end at most that connection, a bad setting is one line at the stop (which goes on) or a usage error,
and the token never appears in the job's output.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from llmpdb.remote import listener as remote

from .pty_session import ROOT
from .test_remote import Job

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def jobs():
    started: list[Job] = []
    yield started
    for job in started:
        job.kill()


def _drive(conn: remote.Connection, answer) -> list[tuple[str, str]]:
    """Read frames until the session ends; at each prompt send ``answer(output so far)``."""
    frames, output = [], ""
    while True:
        frame = conn.recv(timeout=30)
        if frame is None:
            return frames
        frames.append(frame)
        if frame[0] == "O":
            output += frame[1]
        elif frame[0] == "P":
            conn.send("L", answer(output))
            output = ""
        elif frame[0] == "Q":
            return frames


def test_the_token_is_never_in_the_log_and_the_client_finds_it_by_itself(tmp_path, jobs):
    jobs.append(job := Job(tmp_path, LLMPDB_HEADLESS="attach", LLMPDB_LISTEN="tcp", LLMPDB_ATTACH_TIMEOUT="60"))
    target, _, token_file = job.attach_args()
    token = open(token_file).read().splitlines()[0]
    host_port = target[len("tcp:"):]  # debugpy's spelling: 127.0.0.1:PORT, no tcp:, no --token-file
    result = subprocess.run([sys.executable, "-m", "llmpdb", "attach", host_port], env=job.env, cwd=ROOT,
                            input="p total\nc\nc\n", capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "42" in result.stdout
    status, out = job.finish()
    assert status == 0 and "result 43" in out
    assert token not in job.stderr() and token not in out  # before: "(token ...)" ended the log line


@pytest.mark.parametrize("spec", ["tcp:99999", "tcp:abc", "tcp:0.0.0.0:0"])
def test_a_bad_listen_setting_is_one_line_at_the_stop_which_goes_on(tmp_path, jobs, spec):
    jobs.append(job := Job(tmp_path, LLMPDB_HEADLESS="attach", LLMPDB_LISTEN=spec, LLMPDB_ATTACH_TIMEOUT="5"))
    status, out = job.finish()
    err = job.stderr()
    assert status == 0 and "result 43" in out, err
    assert "Traceback" not in err and "RemoteError" not in err
    assert err.count("llmpdb: cannot listen: ") == 1, err
    assert not list(tmp_path.glob("*crash*")) and not list(tmp_path.glob("*report*"))


@pytest.mark.parametrize("spec", ["tcp:99999", "tcp:abc", "0.0.0.0:5678", "tcp:[::]:0"])
def test_a_bad_listen_option_is_a_usage_error(tmp_path, spec):
    script = tmp_path / "job.py"
    script.write_text("print('ran')\n")
    env = {**os.environ, "PYTHONPATH": ROOT, "XDG_RUNTIME_DIR": str(tmp_path)}
    env.pop("LLMPDB_LISTEN_PUBLIC", None)
    result = subprocess.run([sys.executable, "-m", "llmpdb", "--listen", spec, str(script)], env=env,
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("llmpdb: --listen: ") and len(result.stderr.strip().splitlines()) == 1
    assert "ran" not in result.stdout


def test_listen_on_host_port_is_tcp_and_no_file_in_the_cwd(tmp_path, jobs):
    jobs.append(job := Job(tmp_path, llmpdb_args=["--listen", "127.0.0.1:0"], LLMPDB_ATTACH_TIMEOUT="1"))
    assert job.attach_args()[0].startswith("tcp:127.0.0.1:")
    status, out = job.finish()
    assert status == 0 and "result 43" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.err", "job.py"]  # before: a socket "127.0.0.1:0"


def test_listen_public_warns_and_needs_the_token(tmp_path, jobs):
    jobs.append(job := Job(tmp_path, llmpdb_args=["--listen", "tcp:0.0.0.0:0", "--listen-public"],
                           LLMPDB_ATTACH_TIMEOUT="3"))
    job.wait_for(r"llmpdb: warning: listening on tcp:0\.0\.0\.0:\d+, which other machines may reach")
    status, out = job.finish()
    assert status == 0 and "result 43" in out


def test_a_hello_of_brackets_ends_that_connection_and_the_job_goes_on(tmp_path, jobs):
    jobs.append(job := Job(tmp_path, LLMPDB_HEADLESS="attach", LLMPDB_LISTEN="tcp", LLMPDB_ATTACH_TIMEOUT="4"))
    sock = remote.connect(job.attach_args()[0])
    payload = b"[" * 60_000
    sock.sendall(b"H" + len(payload).to_bytes(4, "big") + payload)
    answer = remote.Connection(sock).recv(timeout=15)
    assert answer == ("E", "llmpdb: refused: no hello (no token)")
    status, out = job.finish()
    assert status == 0 and "result 43" in out, job.stderr()  # before: RecursionError killed the job
    assert "Traceback" not in job.stderr()


def test_a_dripping_peer_does_not_hold_the_stop(tmp_path, jobs):
    jobs.append(job := Job(tmp_path, LLMPDB_HEADLESS="attach", LLMPDB_ATTACH_TIMEOUT="2"))
    path = job.attach_args()[0]
    start = time.time()
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(path)
        for byte in b"H\x00\x00\x00\x10{\"who\": \"slow\"}":  # one byte every 0.8 s: each recv is in time
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                break
            if job.proc.poll() is not None:
                break
            time.sleep(0.8)
        status, out = job.finish()
    assert status == 0 and "result 43" in out
    assert time.time() - start < 16  # the hello's deadline (10 s) is in all; before: 17 bytes x 0.8 s and on


def test_output_over_the_frame_limit_keeps_the_client_and_the_stop(tmp_path, jobs):
    jobs.append(job := Job(tmp_path, LLMPDB_HEADLESS="attach", LLMPDB_ATTACH_TIMEOUT="30"))
    conn = remote.Connection(remote.connect(job.attach_args()[0]))
    conn.send("H", json.dumps({"who": "test"}))
    answers = iter(['p "x" * 2_000_000', "p total * 1000", "c", "c"])
    seen: list[str] = []

    def answer(output: str) -> str:
        seen.append(output)
        return next(answers)

    frames = _drive(conn, answer)
    assert seen[1].count("x") == 2_000_000  # before: the client was dropped and the stop lost
    assert "42000" in seen[2]
    assert all(len(text.encode()) <= 1 << 20 for _, text in frames)
    assert frames[-1][0] == "Q"
    status, out = job.finish()
    assert status == 0 and "result 43" in out


def test_an_infinite_attach_timeout_waits_for_a_client(tmp_path, jobs):
    jobs.append(job := Job(tmp_path, LLMPDB_HEADLESS="attach", LLMPDB_ATTACH_TIMEOUT="inf"))
    job.wait_for("is over a week; waiting 604800 s")
    conn = remote.Connection(remote.connect(job.attach_args()[0]))  # before: OverflowError in select
    conn.send("H", "{}")
    _drive(conn, lambda output: "c")
    status, out = job.finish()
    assert status == 0 and "result 43" in out
