"""Closed and unusable standard streams: ``<&-``, ``>&-``, ``2>&-``, nohup's write-only stdin, ``nohup`` in a
terminal. Each stop logs to whatever stream is still open and continues; the program keeps its own exit
status and its own output, under ``python -m llmpdb`` and under ``PYTHONBREAKPOINT=llmpdb.set_trace``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pexpect
import pytest

SCRIPT = textwrap.dedent(
    """
    import sys
    def work(n):
        total = n * 2
        breakpoint()
        return total
    result = work(21)
    print("result", result)
    with open(sys.argv[1], "w") as marker:
        marker.write(f"finished {result}")
    sys.exit(3)
    """
)

# (name, shell redirection, stdin given to Popen)
CLOSURES = [
    ("stdin closed", "0<&-", None),
    ("stdout closed", "</dev/null >&-", None),
    ("stderr closed", "</dev/null 2>&-", None),
    ("stdin and stdout closed", "0<&- >&-", None),
    ("all three closed", "0<&- >&- 2>&-", None),
    ("stdin write-only", "", "write-only"),
]


def _command(mode: str, script, marker) -> list[str]:
    if mode == "cli":
        return [sys.executable, "-m", "llmpdb", str(script), str(marker)]
    return [sys.executable, str(script), str(marker)]


def _env(mode: str) -> dict:
    env = {**os.environ, "NO_COLOR": "1", "LLMPDB_TOUR": "p total"}
    env.pop("PYTHONBREAKPOINT", None)
    if mode == "hook":
        env["PYTHONBREAKPOINT"] = "llmpdb.set_trace"
    return env


def _run(argv, redirection, stdin_kind, env, cwd):
    stdin = subprocess.DEVNULL
    if stdin_kind == "write-only":  # what nohup puts in place of a terminal's stdin
        stdin = os.open(os.devnull, os.O_WRONLY)
    try:
        proc = subprocess.Popen(["sh", "-c", f'exec "$@" {redirection}', "sh", *argv], stdin=stdin,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
        try:
            out, err = proc.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"the program hung with {redirection or stdin_kind}:\n{out}\n{err}")
    finally:
        if isinstance(stdin, int) and stdin > 2:
            os.close(stdin)
    return proc.returncode, out, err


@pytest.mark.parametrize("mode", ["cli", "hook"])
@pytest.mark.parametrize("name, redirection, stdin_kind", CLOSURES, ids=[c[0] for c in CLOSURES])
def test_a_stop_with_closed_streams_logs_and_continues(tmp_path, mode, name, redirection, stdin_kind):
    script, marker = tmp_path / "job.py", tmp_path / "marker.txt"
    script.write_text(SCRIPT)
    code, out, err = _run(_command(mode, script, marker), redirection, stdin_kind, _env(mode), tmp_path)
    assert code == 3, (out, err)
    assert marker.read_text() == "finished 42"
    assert "Traceback" not in out + err
    if "stdout" not in name and "all" not in name:
        assert "result 42\n" in out  # the program's own output is intact
    log = out if ("stdout" not in name and "all" not in name) else err
    if "all" in name:
        assert out == err == ""
        return
    assert "job.py(6)work()" in log  # the stop's header went to the stream still open
    assert "(llmpdb tour) p total\n42\n" in log
    assert "llmpdb: no more input (no terminal); continuing" in log
    if "stdin" in name:
        assert "llmpdb: standard input is closed or unreadable" in log
    if "stdout" in name:
        assert "standard output is closed, writing to standard error" in err
    if mode == "cli":
        assert "llmpdb: the program exited via sys.exit(3)" in log


@pytest.mark.skipif(shutil.which("nohup") is None, reason="needs nohup")
@pytest.mark.parametrize("mode", ["cli", "hook"])
def test_nohup_in_a_terminal_finishes_the_job(tmp_path, mode):
    """In a terminal nohup gives the job a write-only stdin and sends stdout and stderr to nohup.out."""
    script, marker = tmp_path / "job.py", tmp_path / "marker.txt"
    script.write_text(SCRIPT)
    argv = _command(mode, script, marker)
    child = pexpect.spawn(shutil.which("nohup"), argv, cwd=str(tmp_path), env=_env(mode), encoding="utf-8",
                          timeout=90)
    try:
        child.expect(pexpect.EOF)
        child.close()
    finally:
        if child.isalive():
            child.terminate(force=True)
    log = (tmp_path / "nohup.out").read_text()
    assert child.exitstatus == 3, log
    assert marker.read_text() == "finished 42"
    assert "Traceback" not in log and "Bad file descriptor" not in log
    assert "llmpdb: standard input is closed or unreadable" in log
    assert "(llmpdb tour) p total\n42\n" in log
    assert "result 42\n" in log
