"""``python -m llmpdb attach`` against whatever answers at the address (a stale path, a port taken by someone
else): a welcome that is not the job's is data, checked, never a traceback."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.timeout(60)


def _frame(kind: bytes, data: bytes) -> bytes:
    return kind + len(data).to_bytes(4, "big") + data


@pytest.mark.parametrize("welcome", [b"[" * 60_000, b"[1, 2]", b'{"commands": [1, null, {"a": 2}], "pid": []}',
                                     b'"text"'], ids=["deep", "list", "bad-commands", "string"])
def test_a_welcome_that_is_not_the_jobs_is_one_line_not_a_traceback(welcome):
    folder = tempfile.mkdtemp(prefix="ah", dir="/tmp")
    path = os.path.join(folder, "s.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(1)

    def serve():
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)  # the hello
            conn.sendall(_frame(b"W", welcome) + _frame(b"Q", b"over"))
            conn.settimeout(5)
            try:
                conn.recv(1)
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        result = subprocess.run([sys.executable, "-m", "llmpdb", "attach", path], env={**os.environ, "PYTHONPATH": ROOT,
                                "HOME": folder}, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=45)
    finally:
        server.close()
        thread.join(5)
        shutil.rmtree(folder, ignore_errors=True)
    assert "Traceback" not in result.stderr, result.stderr  # before: RecursionError / AttributeError
    assert result.returncode == 0 and "over" in result.stdout
