"""Ranks under failure (#23) with real jobs: `n` over DDP's backward under a 5 s group timeout, a lone stop
while the others sit in a collective (and `ranks --job` on that paused job), `q` in a job started by hand
without torchrun, torchrun itself killed (`kill -9` of the agent that hosts the store).

Usage::

    python -m pytest tests/e2e/test_torchrun_failure.py -q

Each test has its own timeout and kills what it started (``torchrun()``/``_kill_job`` of test_torchrun.py;
the hand-started ranks run in pty sessions that are closed by force at the end).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time

import pexpect
import pytest

from .pty_session import ROOT, PtySession
from .test_torchrun import (BREAK_LINE, EXAMPLE, _alive, _children, _first_prompt, _ours, _ranks_once, _sections,
                            _source_line, torchrun)


@pytest.mark.timeout(60)
def test_next_over_ddp_backward_with_a_5_s_group_timeout_releases_the_waiting_rank_in_time():
    """The step watchdog released rank 1 after LLMPDB_RANK_GRACE (5 s), as long as the group's timeout: the
    all-reduce in backward timed out and the job died. Now it releases after 1 s; `ranks` shows rank 0's
    current line after the step."""
    with torchrun([EXAMPLE], PYTHONBREAKPOINT="llmpdb.set_trace", DDP_TIMEOUT="5", LLMPDB_RANK_GRACE="5",
                  LLMPDB_STEP_GRACE=None) as session:
        assert f"ddp_train.py({BREAK_LINE})main()" in _first_prompt(session)
        assert f"ddp_train.py({BREAK_LINE + 1})main()" in session.run("n")  # onto loss.backward()
        rows = _ranks_once(session, "r1", "waiting")
        assert rows["r0"].startswith(f"prompt at examples/ddp_train.py:{BREAK_LINE + 1} (main)"), rows
        assert rows["r1"].startswith(f"waiting at examples/ddp_train.py:{BREAK_LINE} (main)"), rows
        stepped = session.run("n")
        assert "llmpdb r0: the step has run 1 s while rank(s) 1 wait at examples/ddp_train.py:" in stepped, stepped
        assert f"ddp_train.py({BREAK_LINE + 2})main()" in stepped, stepped
        rest = session.finish("c")
        assert "rank 0/2: done" in rest and "rank 1/2: done" in rest, rest
        assert session.exitstatus == 0, rest


@pytest.mark.timeout(90)
def test_a_lone_stop_names_the_group_timeout_and_ranks_job_shows_its_breakpoint(tmp_path):
    """Rank 1 stops alone while rank 0 sits in an all-reduce (DDP_HANG): the prompt says the others are
    probably in a collective timing out after 30 s; `ranks --job` shows rank 1 at its breakpoint, not in the
    line editor (unix_console.py, prompt_toolkit)."""
    env = dict(PYTHONBREAKPOINT="llmpdb.set_trace", DDP_LONE_RANK="1", DDP_HANG="1", DDP_TIMEOUT="30",
               LLMPDB_RANK_GRACE="3", LLMPDB_DUMP_POLL="0.2", TMPDIR=str(tmp_path))
    with torchrun([EXAMPLE], **env) as session:
        _first_prompt(session)
        lone = session.run("c")
        assert session.child.after == "(llmpdb r1) ", lone
        assert "rank 1 stopped here alone and takes the terminal (`ranks` shows the others); the other ranks are " \
               "probably in a collective that times out after 30 s" in lone, lone
        cli = {**os.environ, **env, "PYTHONPATH": ROOT, "NO_COLOR": "1"}
        out = subprocess.run([sys.executable, "-m", "llmpdb", "ranks", "--job", "--timeout", "5"], cwd=ROOT,
                             env=cli, capture_output=True, text=True, timeout=40)
        sections = _sections(out.stdout)
        line = _source_line("# this rank only") + 1
        assert re.search(rf"main thread at \S+/examples/ddp_train\.py:{line} \(main\)", sections.get(1, "")), out.stdout
        assert "unix_console" not in out.stdout and "prompt_toolkit" not in out.stdout, out.stdout
        session.child.sendline("q")
        session.child.expect(pexpect.EOF, timeout=20)


def _free_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


@pytest.mark.timeout(90)
def test_quit_in_a_job_started_by_hand_ends_every_rank():
    """No torchrun: two terminals, MASTER_ADDR/PORT, RANK and WORLD_SIZE set by hand, env:// init. Rank 0's
    `q` used to take rank 0's store with it; rank 1 then opened a prompt where `q` printed a BdbQuit
    traceback. Now rank 1 sees the quit (or the store gone) and ends."""
    port = _free_port()
    env = {"PYTHONPATH": ROOT, "PYTHONBREAKPOINT": "llmpdb.set_trace", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": port, "WORLD_SIZE": "2", "DDP_TIMEOUT": "30", "LLMPDB_RANK_GRACE": "30",
           "LLMPDB_RANK": None, "LOCAL_RANK": None, "TORCHELASTIC_USE_AGENT_STORE": None}
    with PtySession([EXAMPLE], env={**env, "RANK": "0"}, timeout=30) as rank0, \
            PtySession([EXAMPLE], env={**env, "RANK": "1"}, timeout=30) as rank1:
        assert f"ddp_train.py({BREAK_LINE})main()" in rank0.wait_prompt()
        assert rank0.child.after == "(llmpdb r0) "
        _ranks_once(rank0, "r1", "waiting")
        rank0.child.sendline("q")
        rank0.child.expect(pexpect.EOF, timeout=20)
        started = time.monotonic()
        index = rank1.child.expect([pexpect.EOF, r"\(llmpdb r1\) "], timeout=20)
        said = rank1.child.before
        assert index == 0, said  # no prompt of its own on rank 1
        assert time.monotonic() - started < 10
        assert "BdbQuit" not in said and "ends too (exit status 3)" in said, said
        rank0.child.close()
        rank1.child.close()
        assert rank0.child.exitstatus == 3 and rank1.child.exitstatus == 3


@pytest.mark.timeout(90)
def test_ctrl_c_while_the_job_runs_ends_it_cleanly_instead_of_opening_a_prompt_torchrun_kills(tmp_path):
    """Ctrl-C while the job runs: torchrun forwards SIGINT to every rank and SIGKILLs them 30 s later. The
    rank with llmpdb's handler (rank 1 here, `--rank 1 -c continue`) used to open "Program interrupted"
    there, and a rank without it a post-mortem of KeyboardInterrupt; now each ends at once, saying why."""
    # DDP_BREAK=0: no breakpoint() on the way, so the Ctrl-C always finds the ranks running (start-up,
    # training or the hang), never at a prompt that rank 1 reached first (a fast machine got there in 1 s)
    env = dict(DDP_HANG="1", DDP_BREAK="0", DDP_TIMEOUT="5", TMPDIR=str(tmp_path), LLMPDB_DUMP_POLL="0")
    with torchrun(["-m", "llmpdb", "--rank", "1", "-c", "continue", EXAMPLE], **env) as session:
        deadline = time.monotonic() + 40
        while not list(tmp_path.glob("llmpdb-jobs-*/*.json")) and time.monotonic() < deadline:
            time.sleep(0.2)  # rank 1 registered the job at its first line; -c continue runs on
        session.workers = [pid for pid in _children(session.child.pid)]
        time.sleep(1)  # both ranks run Python code (start-up, training, rank 1's DDP_HANG loop)
        session.child.sendintr()
        index = session.child.expect([pexpect.EOF, r"\(llmpdb r\d\) "], timeout=40)
        text = session.child.before
        assert index == 0, text  # no prompt torchrun would kill
        assert "llmpdb r1: Ctrl-C: torchrun ends the job (it signals every rank and kills them 30 s later); " \
               "rank 1 ends now (exit status 130)" in text, text
        assert "Program interrupted" not in text, text


def _rank_env(pid: int) -> str | None:
    """The RANK torchrun gave the worker ``pid`` (its environment, as /proc shows it)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            words = handle.read().split(b"\0")
    except OSError:
        return None
    return next((word[5:].decode() for word in words if word.startswith(b"RANK=")), None)


@pytest.mark.timeout(90)
def test_kill_9_of_torchrun_ends_the_waiting_rank_and_rank_0_keeps_its_one_prompt():
    """`kill -9` of torchrun (the agent hosting the store) with rank 0 at the prompt and rank 1 waiting: the
    workers were left as orphans, rank 1 opened a prompt of its own on the same terminal and `ranks` failed with
    a Broken pipe. Now rank 1 says in one line that torchrun is gone and ends; rank 0 keeps the one prompt,
    `ranks` says so in one line, and torch's C++ "Broken pipe" warnings never show (no store call is made)."""
    torchrun_argv = " ".join(shlex.quote(word) for word in [sys.executable, "-m", "torch.distributed.run",
                                                            "--nproc-per-node", "2", "--monitor-interval", "0.1", EXAMPLE])
    # a shell owns the terminal, as in a user's terminal: it outlives torchrun, so the workers keep the pty
    script = f"{torchrun_argv}; echo torchrun ended; sleep 60"
    env = {"PYTHONPATH": ROOT, "PYTHONBREAKPOINT": "llmpdb.set_trace", "DDP_TIMEOUT": "30", "LLMPDB_RANK_GRACE": "30",
           "LLMPDB_RANK_POLL": "0.2", "LLMPDB_RANK": None}
    workers: list[int] = []
    with PtySession(["-c", script], env=env, timeout=30, executable="/bin/sh") as session:
        try:
            _first_prompt(session)
            assert session.child.after == "(llmpdb r0) "
            _ranks_once(session, "r1", "waiting")
            launcher = next(pid for pid in _children(session.child.pid) if _ours(pid))
            workers = _children(launcher)
            assert len(workers) == 2, workers
            rank1 = next(pid for pid in workers if _rank_env(pid) == "1")
            os.kill(launcher, signal.SIGKILL)
            session.child.expect(rf"llmpdb r1: torchrun \(pid {launcher}\) is gone, and the job's store with it; "
                                 r"rank 1 does not open a prompt of its own and ends too \(exit status 3\)", timeout=15)
            deadline = time.monotonic() + 10
            while _alive(rank1) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not _alive(rank1), "rank 1 still runs"
            said = session.run("ranks")
            assert f"*** ranks: torchrun (pid {launcher}) is gone, and the job's store with it: no rank states " \
                   "to show" in said, said
            assert session.child.after == "(llmpdb r0) "
            assert "2" in session.run("p 1 + 1")  # rank 0's prompt still works, alone
            text = "".join(session.transcript)
            assert "(llmpdb r1)" not in text and "Broken pipe" not in text and "TCPStore.cpp" not in text, text
            session.child.sendline("q")
            session.child.expect("quit on rank 0: every rank of the job ends \\(exit status 3\\)", timeout=15)
            deadline = time.monotonic() + 10
            while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not any(_alive(pid) for pid in workers)
        finally:
            for pid in workers:
                if _ours(pid):
                    with contextlib.suppress(OSError):
                        os.killpg(pid, signal.SIGKILL)  # each worker leads a session of its own
            if session.child.isalive():
                with contextlib.suppress(OSError):
                    os.killpg(session.child.pid, signal.SIGKILL)  # the shell (and torchrun, if it still runs)
            session.child.close(force=True)
