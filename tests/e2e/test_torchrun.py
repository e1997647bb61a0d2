"""Real ``torchrun --nproc-per-node 2`` jobs (gloo on the CPU) driven in a pty: one rank prompts, the other waits.

Usage::

    python -m pytest tests/e2e/test_torchrun.py -q

Each test starts ``python -m torch.distributed.run`` on ``examples/ddp_train.py`` (in its own pty session,
or a new session) and kills, in a ``finally``, the launcher's process group while the launcher is still
unreaped and each worker's (torchrun starts every worker in a session of its own) after checking that the
pid still runs the example. Each has its own timeout; the file runs eight jobs, about 70 s on an idle
two-core machine.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import shutil
import sys
import tempfile
import time

import pexpect
import pytest

from .pty_session import ROOT, PtySession

TORCHRUN = ["-m", "torch.distributed.run", "--nproc-per-node", "2", "--monitor-interval", "0.1"]
EXAMPLE = "examples/ddp_train.py"
with open(os.path.join(ROOT, EXAMPLE), encoding="utf-8") as _example:
    BREAK_LINE = 1 + next(n for n, line in enumerate(_example, 1) if "breakpoint()  # every rank" in line)


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _ours(pid: int, script: str = EXAMPLE) -> bool:
    """A live process running ``script`` (this file's example by default): never signal a pid the system
    reused."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            command = handle.read().replace(b"\0", b" ")
    except OSError:
        return False
    return script.encode() in command and _alive(pid)


def _kill_job(launcher: int, workers: set[int], launcher_alive: bool, script: str = EXAMPLE) -> None:
    """SIGKILL the launcher's group (only while the launcher is unreaped: its pid is still ours) and each
    worker's group running ``script`` (torchrun starts every worker in a session of its own)."""
    if launcher_alive:
        workers |= set(_children(launcher))
        with contextlib.suppress(OSError):
            os.killpg(launcher, signal.SIGKILL)
    for pid in workers:
        if _ours(pid, script):
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)


@contextlib.contextmanager
def torchrun(args: list[str], **env: str):
    """A PtySession running torchrun; ``session.workers`` lists the worker pids once the first prompt shows."""
    env = {"PYTHONPATH": ROOT, "DDP_TIMEOUT": "3",
           "LLMPDB_RANK_GRACE": "5", "PYTHONBREAKPOINT": None, "LLMPDB_RANK": None, **env}
    session = PtySession([*TORCHRUN, *args], env=env, timeout=30)
    session.workers = []
    try:
        yield session
    finally:
        # pexpect made the launcher a session leader; once pexpect reaped it, its pid may be someone else's
        _kill_job(session.child.pid, set(session.workers), not session.child.closed and session.child.isalive())
        session.child.close(force=True)


def _first_prompt(session) -> str:
    text = session.wait_prompt()
    session.workers = _children(session.child.pid)
    return text


def _ranks_table(session) -> dict[str, str]:
    rows = {}
    for line in session.run("ranks").splitlines():
        match = re.match(r"(r\d)[* ]\s+(.*)$", line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


def _ranks_once(session, rank: str, prefix: str, timeout: float = 20) -> dict[str, str]:
    """`ranks` until ``rank``'s row starts with ``prefix`` (the other rank may still be on its way)."""
    deadline = time.monotonic() + timeout
    rows = _ranks_table(session)
    while not rows.get(rank, "").startswith(prefix) and time.monotonic() < deadline:
        time.sleep(0.5)
        rows = _ranks_table(session)
    return rows


@pytest.mark.timeout(60)
def test_rank0_prompts_rank1_waits_at_the_same_line_past_the_group_timeout_then_takes_over_with_rank_1():
    with torchrun([EXAMPLE], PYTHONBREAKPOINT="llmpdb.set_trace") as session:
        header = _first_prompt(session)
        assert f"ddp_train.py({BREAK_LINE})main()" in header
        assert session.child.after == "(llmpdb r0) "
        stopped = time.monotonic()
        rows = _ranks_once(session, "r1", "waiting")
        assert rows["r0"].startswith(f"prompt at examples/ddp_train.py:{BREAK_LINE} (main)"), rows
        assert rows["r1"].startswith(f"waiting at examples/ddp_train.py:{BREAK_LINE} (main)"), rows
        shapes = session.run("shapes")
        assert re.search(r"^batch\s+\(16, 4\)\s+f32", shapes, re.M), shapes
        assert re.search(r"^loss\s+\(\)\s+f32", shapes, re.M), shapes
        stack = session.run("stack-model")
        assert re.search(rf"^>#\d+\s+main\(\)\s+ddp_train\.py:{BREAK_LINE}\b", stack, re.M), stack
        assert "rank0 on: rank 0 prompts" in session.run("rank0")
        time.sleep(max(0.0, 4 - (time.monotonic() - stopped)))  # longer than the group's 3 s timeout
        assert "(llmpdb r1)" not in "".join(session.transcript)
        handed = session.run("rank 1")
        assert "rank: rank 1 takes the terminal; rank 0 waits here until it continues" in handed, handed
        assert "llmpdb r1: rank 0 handed the terminal to rank 1" in handed, handed
        assert session.child.after == "(llmpdb r1) "
        rows = _ranks_table(session)
        assert rows["r0"].startswith(f"waiting at examples/ddp_train.py:{BREAK_LINE}"), rows
        assert rows["r1"].startswith(f"prompt at examples/ddp_train.py:{BREAK_LINE}"), rows
        rest = session.finish("c")
        assert "rank 0/2: done" in rest and "rank 1/2: done" in rest, rest
        assert session.exitstatus == 0, rest


@pytest.mark.timeout(90)
def test_rank0_late_past_the_grace_joins_the_stop_rank1_prompts_for_one_prompt_per_breakpoint():
    """Rank 0 reaches the breakpoint 6 s after rank 1 (grace 2 s): rank 1 took the terminal. Rank 0 used to
    queue, then prompt a second time at the same breakpoint after `c` while rank 1 sat in the all-reduce,
    and the 3 s group timeout killed the job. Now it joins rank 1's stop and continues with it."""
    with torchrun([EXAMPLE], PYTHONBREAKPOINT="llmpdb.set_trace", DDP_LATE_RANK="0", DDP_LATE_SECONDS="6",
                  LLMPDB_RANK_GRACE="2", DDP_TIMEOUT="30") as session:
        header = _first_prompt(session)
        assert session.child.after == "(llmpdb r1) ", header
        assert "rank 0 did not stop here within 2 s; rank 1 stopped here alone" in header, header
        session.child.expect("rank 0 waits here and continues with the others", timeout=30)
        rows = _ranks_once(session, "r0", "waiting")
        assert rows["r0"].startswith(f"waiting at examples/ddp_train.py:{BREAK_LINE}"), rows
        rest = session.finish("c")
        assert "(llmpdb r0)" not in rest and rest.count("(llmpdb r1)") == 0, rest
        assert "rank 0/2: done" in rest and "rank 1/2: done" in rest, rest
        assert session.exitstatus == 0, rest


@pytest.mark.timeout(90)
def test_quit_under_max_restarts_ends_the_job_instead_of_restarting_it():
    """torchrun --max-restarts 2 restarted the job after `q` (it took three `q`): the elastic agent restarts
    failed workers. The quitting rank asks its launcher to end the job."""
    with torchrun(["--max-restarts", "2", EXAMPLE], PYTHONBREAKPOINT="llmpdb.set_trace") as session:
        _first_prompt(session)
        session.child.sendline("q")
        session.child.expect("every rank of the job ends", timeout=20)
        session.child.expect("asking torchrun \\(pid \\d+\\) to end the job instead of restarting it "
                             "\\(2 restart\\(s\\) were left\\)", timeout=20)
        session.child.expect(pexpect.EOF, timeout=30)
        rest = session.child.before
        assert "(llmpdb r" not in rest, rest  # no second round of the job prompted again
        session.child.close()
        assert session.child.exitstatus not in (0, None), rest


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["quit", "ctrl-d", "ctrl-c twice"])
def test_quit_ctrl_d_or_ctrl_c_twice_on_rank0_ends_every_rank_within_10_s(how):
    with torchrun([EXAMPLE], PYTHONBREAKPOINT="llmpdb.set_trace") as session:
        _first_prompt(session)
        assert len(session.workers) == 2
        started = time.monotonic()
        if how == "quit":
            session.child.sendline("q")
        elif how == "ctrl-d":
            session.child.sendeof()
        else:
            session.child.sendintr()
            session.child.expect("Ctrl-C again ends every rank of the job")
            session.child.sendintr()
        session.child.expect(pexpect.EOF, timeout=10)
        elapsed = time.monotonic() - started
        session.child.close()
        text = session.child.before
        said = "Ctrl-C twice on rank 0" if how == "ctrl-c twice" else "quit on rank 0"
        assert f"llmpdb r0: {said}: every rank of the job ends (exit status 3)" in text, text
        assert session.exitstatus not in (0, None)
        assert elapsed < 10
        assert not [pid for pid in session.workers if _alive(pid)]


@pytest.mark.timeout(60)
def test_python_m_llmpdb_stops_rank0_at_line_1_a_breakpoint_only_rank1_reaches_and_its_failure_prompt_on_rank1():
    with torchrun(["-m", "llmpdb", EXAMPLE], DDP_LONE_RANK="1", DDP_FAIL_RANK="1") as session:
        assert "ddp_train.py(1)<module>()" in _first_prompt(session)
        rows = _ranks_table(session)
        assert rows["r0"].startswith("prompt at examples/ddp_train.py:1 (<module>)"), rows
        assert not rows["r1"].startswith("waiting"), rows  # rank 1 runs on to its first breakpoint
        session.run("c")
        assert session.child.after == "(llmpdb r0) "
        assert _ranks_once(session, "r1", "waiting")["r1"].startswith(f"waiting at examples/ddp_train.py:{BREAK_LINE}")
        lone = session.run("c")  # rank 0 finishes; rank 1 stops alone after training
        assert "llmpdb r1: rank 0 has finished; rank 1 stopped here alone and takes the terminal" in lone, lone
        assert session.child.after == "(llmpdb r1) "
        rows = _ranks_table(session)
        assert rows["r0"].startswith("finished") and rows["r1"].startswith("prompt at"), rows
        failed = session.run("c")  # rank 1 raises: post-mortem on rank 1
        fail_line = _source_line("fails on purpose")
        assert (f"llmpdb r1: rank 1 failed: post-mortem of RuntimeError at examples/ddp_train.py:{fail_line} (main); "
                "it takes the terminal") in failed, failed
        assert session.child.after == "(llmpdb r1) "
        rest = session.finish("c")
        assert session.exitstatus not in (0, None), rest


@pytest.mark.timeout(60)
def test_a_rank_whose_output_torchrun_hides_prompts_and_next_into_the_all_reduce_does_not_hang():
    """--local-ranks-filter 0 sends rank 1's output to /dev/null; LLMPDB_RANK=1 makes rank 1 prompt. Its
    `next` over loss.backward() needs rank 0, which waits at the breakpoint: the watchdog releases it."""
    args = ["--local-ranks-filter", "0", EXAMPLE]
    with torchrun(args, PYTHONBREAKPOINT="llmpdb.set_trace", LLMPDB_RANK="1", DDP_TIMEOUT="60",
                  LLMPDB_RANK_GRACE="3") as session:  # 3 s: the first `n` never takes that long, even on a busy CPU
        header = _first_prompt(session)
        assert f"ddp_train.py({BREAK_LINE})main()" in header
        assert session.child.after == "(llmpdb r1) "
        rows = _ranks_once(session, "r0", "waiting")
        assert rows["r0"].startswith("waiting at") and rows["r1"].startswith("prompt at"), rows
        assert "(16, 4)" in session.run("p tuple(batch.shape)")
        assert f"ddp_train.py({BREAK_LINE + 1})main()" in session.run("n")  # -> loss.backward()
        stepped = session.run("n")
        assert "llmpdb r1: the step has run 1 s while rank(s) 0 wait at examples/ddp_train.py:" in stepped, stepped
        assert "they run on to their next breakpoint" in stepped
        assert f"ddp_train.py({BREAK_LINE + 2})main()" in stepped, stepped
        assert session.child.after == "(llmpdb r1) "
        rest = session.finish("c")
        assert "rank 0/2: done" in rest and "rank 1/2: done" not in rest, rest  # rank 1's output stays hidden
        assert session.exitstatus == 0, rest


def _source_line(marker: str) -> int:
    with open(os.path.join(ROOT, EXAMPLE), encoding="utf-8") as handle:
        return next(n for n, line in enumerate(handle, 1) if marker in line)


def _sections(text: str) -> dict[int, str]:
    """``=== rank N ...`` sections of ``python -m llmpdb ranks --job``."""
    parts = re.split(r"^=== rank (\d+)", text, flags=re.M)
    return {int(parts[i]): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


@pytest.mark.timeout(90)
def test_a_job_hung_in_a_collective_shows_every_ranks_stack_and_shapes_from_another_terminal(tmp_path):
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONBREAKPOINT", "LLMPDB_RANK")}
    env.update(PYTHONPATH=ROOT, TMPDIR=str(tmp_path), DDP_HANG="1", LLMPDB_DUMP_POLL="0.2", NO_COLOR="1")
    log = open(tmp_path / "job.log", "w+", encoding="utf-8")
    job = subprocess.Popen([sys.executable, *TORCHRUN, "-m", "llmpdb", "-c", "continue", EXAMPLE], cwd=ROOT, env=env,
                           stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    workers: set[int] = set()
    try:
        deadline, sections, out = time.monotonic() + 60, {}, None
        while time.monotonic() < deadline:
            time.sleep(1)
            workers |= set(_children(job.pid))
            out = subprocess.run([sys.executable, "-m", "llmpdb", "ranks", "--job", "--timeout", "5"], cwd=ROOT,
                                 env=env, capture_output=True, text=True, timeout=30)
            sections = _sections(out.stdout)
            if "(all_reduce)" in sections.get(0, "") and "main thread at" in sections.get(1, ""):
                break
        assert out is not None and out.returncode == 0, (out and out.stdout + out.stderr)
        rank0, rank1 = sections[0], sections[1]
        assert re.search(r"main thread at \S+/torch/distributed/distributed_c10d\.py:\d+ \(all_reduce\)", rank0), rank0
        assert re.search(rf"main\(\)\s+ddp_train\.py:{_source_line('dist.all_reduce(loss.detach())')}\b", rank0), rank0
        assert re.search(r"^tensor\s+\(\)\s+f32", rank0, re.M), rank0  # the all-reduce's tensor
        hang_lines = {_source_line("while not os.path.exists"), _source_line("time.sleep(0.05)")}
        where = re.search(r"main thread at \S+/examples/ddp_train\.py:(\d+) \(main\)", rank1)
        assert where and int(where.group(1)) in hang_lines, rank1
        assert re.search(r"^loss\s+\(\)\s+f32\s+4 B\s+MseLossBackward0", rank1, re.M), rank1
        assert job.poll() is None  # nothing was stopped
    finally:
        _kill_job(job.pid, workers, job.poll() is None)
        job.wait(10)
        log.close()


def test_ranks_job_without_a_running_job_says_so(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT, TMPDIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-m", "llmpdb", "ranks", "--job"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2
    assert f"llmpdb: no running torchrun job registered in {tmp_path}/llmpdb-jobs-{os.getuid()}" in out.stderr
    bad = subprocess.run([sys.executable, "-m", "llmpdb", "ranks", "--jobs"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "usage: python -m llmpdb ranks --job [RUN_ID]" in bad.stderr


@pytest.mark.timeout(90)
def test_two_launchers_with_nnodes_2_need_no_extra_step(tmp_path):
    """Two nodes on one machine (static rendezvous): node 1's rank waits for node 0's prompt, and says once
    on node 1's terminal which rank and host hold it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = str(sock.getsockname()[1])
    nodes = ["--nnodes", "2", "--nproc-per-node", "1", "--master-addr", "127.0.0.1", "--master-port", port]
    env = {key: value for key, value in os.environ.items() if key not in ("LLMPDB_RANK",)}
    env.update(PYTHONPATH=ROOT, PYTHONBREAKPOINT="llmpdb.set_trace", DDP_TIMEOUT="30", LLMPDB_RANK_GRACE="30")
    log = open(tmp_path / "node1.log", "w+", encoding="utf-8")
    node1 = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", *nodes, "--node-rank", "1", EXAMPLE],
                             cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)
    workers: set[int] = set()
    try:
        with torchrun([*nodes, "--node-rank", "0", EXAMPLE], PYTHONBREAKPOINT="llmpdb.set_trace",
                      LLMPDB_RANK_GRACE="30") as session:
            _first_prompt(session)
            workers |= set(_children(node1.pid))
            assert session.child.after == "(llmpdb r0) "
            rows = _ranks_once(session, "r1", "waiting")
            assert rows["r1"].startswith(f"waiting at examples/ddp_train.py:{BREAK_LINE} (main)"), rows
            holder = f"llmpdb r1: rank 0 on host {socket.gethostname()} holds the job's prompt (at examples/ddp_train.py:"
            deadline = time.monotonic() + 15  # node 1's rank sees the prompt at its next poll
            while holder not in (tmp_path / "node1.log").read_text() and time.monotonic() < deadline:
                time.sleep(0.2)
            rest = session.finish("c")
            assert "rank 0/2: done" in rest and session.exitstatus == 0, rest
        assert node1.wait(30) == 0
        log.seek(0)
        text = log.read()
        assert "rank 1/2: done" in text
        assert text.count(holder) == 1, text  # node 1's terminal says who prompts, once per stop
    finally:
        _kill_job(node1.pid, workers, node1.poll() is None)
        node1.wait(10)
        log.close()


@pytest.mark.timeout(120)
def test_a_hidden_rank_without_a_terminal_is_announced_by_a_visible_rank_and_can_be_attached(tmp_path):
    """No terminal at all (a batch job), ``--local-ranks-filter 0`` and ``LLMPDB_RANK=1``: rank 1's attach line
    goes to /dev/null, so rank 0, waiting at the same breakpoint, prints it; a client attaches to rank 1."""
    run_dir = tempfile.mkdtemp(prefix="lt", dir="/tmp")  # short: Unix socket paths are limited
    os.chmod(run_dir, 0o700)
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONBREAKPOINT", "LLMPDB_RANK")}
    env.update(PYTHONPATH=ROOT, PYTHONBREAKPOINT="llmpdb.set_trace", LLMPDB_RANK="1", LLMPDB_HEADLESS="attach",
               LLMPDB_ATTACH_TIMEOUT="60", XDG_RUNTIME_DIR=run_dir, DDP_STEPS="1", NO_COLOR="1", HOME=run_dir)
    log_path = tmp_path / "job.log"
    log = open(log_path, "w+", encoding="utf-8")
    job = subprocess.Popen([sys.executable, *TORCHRUN, "--local-ranks-filter", "0", EXAMPLE], cwd=ROOT, env=env,
                           stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    workers: set[int] = set()
    try:
        deadline, match = time.monotonic() + 60, None
        while match is None and time.monotonic() < deadline and job.poll() is None:
            time.sleep(0.2)
            workers |= set(_children(job.pid))
            match = re.search(r"llmpdb r0 relays: (.*python -m llmpdb attach (\S+))", log_path.read_text())
        assert match, log_path.read_text()
        assert f"ddp_train.py:{BREAK_LINE}" in match.group(1) and "r1" in match.group(1), match.group(1)
        assert os.path.basename(match.group(2)).endswith("-r1.sock")
        with PtySession(["-m", "llmpdb", "attach", match.group(2)], env=env, timeout=30) as client:
            first = client.wait_prompt()
            assert f"ddp_train.py({BREAK_LINE})main()" in first, first
            assert client.child.after == "(llmpdb r1) "
            assert client.run("p rank").strip() == "1"
            client.child.sendline("c")
            client.child.expect(pexpect.EOF)
        assert job.wait(60) == 0, log_path.read_text()
        text = log_path.read_text()
        assert "rank 0/2: done" in text and "rank 1/2: done" not in text, text  # rank 1's output stays hidden
        assert text.count("relays:") <= 3, text  # the attach line, then what rank 1 logged until it continued
    finally:
        _kill_job(job.pid, workers, job.poll() is None)
        job.wait(10)
        log.close()
        shutil.rmtree(run_dir, ignore_errors=True)


@pytest.mark.timeout(60)
def test_rank_option_of_python_m_llmpdb_chooses_the_prompting_rank():
    with torchrun(["-m", "llmpdb", "--rank", "1", "-c", "continue", EXAMPLE]) as session:
        header = _first_prompt(session)  # rank 1 makes the first-line stop and runs -c continue; rank 0 runs on
        assert f"ddp_train.py({BREAK_LINE})main()" in header, header
        assert session.child.after == "(llmpdb r1) "
        rows = _ranks_once(session, "r0", "waiting")
        assert rows["r0"].startswith(f"waiting at examples/ddp_train.py:{BREAK_LINE}"), rows
        assert "*** run: cannot restart one rank of a 2-rank job" in session.run("run")
        rest = session.finish("c")
        assert session.exitstatus == 0, rest
