"""The log policy's output as a hostile environment sees it: ``LLMPDB_LOG`` at a symbolic link, a FIFO,
``/dev/full``, an existing 0644 file, a file over ``RLIMIT_FSIZE``; standard output at ``/dev/full``,
buffered and unbuffered. Real subprocesses; each run has a timeout."""

from __future__ import annotations

import os
import resource
import stat
import subprocess
import sys
import textwrap

import pytest

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(TESTS)
pytestmark = pytest.mark.timeout(120)

SCRIPT = textwrap.dedent(
    """
    import sys
    def work():
        hidden = [1, 2, 3]
        breakpoint()
        return hidden
    work()
    print("program done", file=sys.stderr)
    sys.exit(3)
    """
)


def run_job(tmp_path, *, stdout=subprocess.PIPE, module=False, unbuffered=True, preexec=None, **env):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    full = {**os.environ, "PYTHONPATH": ROOT, "PYTHONBREAKPOINT": "llmpdb.set_trace", "NO_COLOR": "1",
            "LLMPDB_HEADLESS": "log", **env}
    full.pop("LLMPDB_LOG", None) if "LLMPDB_LOG" not in env else None
    if not unbuffered:
        full.pop("PYTHONUNBUFFERED", None)
    argv = [sys.executable, *(["-m", "llmpdb"] if module else []), str(script)]
    return subprocess.run(argv, cwd=tmp_path, env=full, stdin=subprocess.DEVNULL, stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=60, preexec_fn=preexec)


def assert_clean(proc, tmp_path):
    assert proc.returncode == 3, proc.stderr  # the program's own status
    assert "program done" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not list(tmp_path.glob("llmpdb-crash-*")), proc.stderr


def test_log_through_a_symbolic_link_is_refused_and_the_target_untouched(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("secret\n")
    (tmp_path / "job.log").symlink_to(victim)
    proc = run_job(tmp_path, LLMPDB_LOG=str(tmp_path / "job.log"))
    assert_clean(proc, tmp_path)
    assert victim.read_text() == "secret\n"
    assert proc.stderr.count("symbolic link") == 1 and "llmpdb log" in proc.stdout  # to the output instead


def test_an_existing_0644_log_becomes_0600(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("earlier\n")
    os.chmod(log, 0o644)
    proc = run_job(tmp_path, LLMPDB_LOG=str(log))
    assert_clean(proc, tmp_path)
    assert stat.S_IMODE(os.stat(log).st_mode) == 0o600
    text = log.read_text()
    assert text.startswith("earlier\n") and "llmpdb log" in text and "job.py:6 work()" in text


def test_log_at_a_fifo_is_refused_in_one_line_without_blocking(tmp_path):
    fifo = tmp_path / "job.log"
    os.mkfifo(fifo)
    proc = run_job(tmp_path, LLMPDB_LOG=str(fifo))  # before: blocked in open() until a reader came
    assert_clean(proc, tmp_path)
    assert [line for line in proc.stderr.splitlines() if "FIFO" in line] == [
        f"llmpdb: LLMPDB_LOG: cannot open {fifo}: it is a FIFO; logging to the output"]


def test_log_at_dev_full_is_refused_and_the_program_goes_on(tmp_path):
    proc = run_job(tmp_path, LLMPDB_LOG="/dev/full")
    assert_clean(proc, tmp_path)
    assert "/dev/full: it is a character device" in proc.stderr


def test_a_log_file_that_cannot_grow_drops_the_text(tmp_path):
    """A regular log file on a 'full disk': RLIMIT_FSIZE makes every write past 1 byte fail (EFBIG)."""
    log = tmp_path / "job.log"
    log.write_text("x")

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (1, 1))

    proc = run_job(tmp_path, LLMPDB_LOG=str(log), preexec=limit)
    assert_clean(proc, tmp_path)
    assert proc.stderr.count(f"cannot write to LLMPDB_LOG={log}") == 1
    assert log.read_text() == "x"


@pytest.mark.parametrize("unbuffered", [True, False])
@pytest.mark.parametrize("module", [False, True])
def test_stdout_at_dev_full(tmp_path, module, unbuffered):
    with open("/dev/full", "w") as full:
        proc = run_job(tmp_path, stdout=full, module=module, unbuffered=unbuffered)
    assert_clean(proc, tmp_path)  # before: OSError [Errno 28] and a crash report, or status 120
    assert proc.stderr.count("cannot write to standard output (No space left on device)") == 1
