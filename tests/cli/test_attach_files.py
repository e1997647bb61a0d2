"""``python -m llmpdb attach`` reading files from outside: ``--token-file`` and the listing's
``job-PID.token`` files at a FIFO, ``/dev/zero``, a directory, non-UTF-8 bytes, a huge file. Every read is
bounded and never blocks; each problem is one line, never a traceback. Real subprocesses, real FIFOs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(TESTS)
pytestmark = pytest.mark.timeout(120)


def attach(args, runtime=None, timeout=30):
    env = {**os.environ, "PYTHONPATH": ROOT, "NO_COLOR": "1"}
    if runtime is not None:
        env["XDG_RUNTIME_DIR"] = str(runtime)
    return subprocess.run([sys.executable, "-m", "llmpdb", "attach", *args], env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)


def hostile_files(folder):
    os.mkfifo(folder / "fifo")
    (folder / "folder").mkdir()
    (folder / "binary").write_bytes(b"\xff\xfe\x00token\x80\n")
    (folder / "huge").write_bytes(b"a" * 100_000)
    return {"fifo": "it is a FIFO", "/dev/zero": "it is a character device", "folder": "it is a directory",
            "binary": "is not UTF-8 text", "huge": "more than 4096 bytes"}


def test_token_file_hostile_kinds_are_refused_in_one_line(tmp_path):
    for name, why in hostile_files(tmp_path).items():
        path = name if name.startswith("/") else str(tmp_path / name)
        proc = attach(["tcp:127.0.0.1:9", "--token-file", path])  # before: blocked, unbounded or traceback
        assert proc.returncode == 1, (name, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and why in lines[0] and lines[0].startswith("llmpdb attach:"), (name, lines)


def test_the_listing_survives_hostile_token_files(tmp_path):
    runtime = tmp_path / "run"
    folder = runtime / "llmpdb"
    folder.mkdir(parents=True)
    os.chmod(folder, 0o700)
    live = [os.getpid(), os.getppid(), 1]  # live processes: the listing reads their token files
    os.mkfifo(folder / f"job-{live[0]}.token")
    (folder / f"job-{live[1]}.token").mkdir()
    (folder / f"job-{live[2]}.token").write_bytes(b"\xff\xfe\x00\x80\n")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        os.symlink("/dev/zero", folder / f"job-{sleeper.pid}.token")
        proc = attach([], runtime=runtime)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 4, lines
    for why in ("it is a FIFO", "it is a directory", "is not UTF-8 text", "it is a symbolic link"):
        assert sum(why in line and "unusable" in line for line in lines) == 1, (why, lines)
