"""A real ``accelerate launch --multi_gpu --num_processes 2`` job on the CPU (gloo) driven in a pty.

Usage::

    python -m pytest tests/e2e/test_accelerate.py -q

``accelerate launch`` runs torchrun's elastic agent inside its own process, so the workers carry torchrun's
environment (``RANK``, ``WORLD_SIZE``, ``TORCHELASTIC_USE_AGENT_STORE``...) and llmpdb coordinates them
through the agent's store. ``--cpu`` and ``--multi_gpu`` exclude each other (``--cpu`` alone runs one
process), so the CPU job is ``--multi_gpu`` with ``ACCELERATE_USE_CPU=1``, which makes ``Accelerator()``
pick gloo on the CPU (``MULTI_CPU``); ``--main_process_port 0`` takes a free port. ``HOME`` and
``HF_HOME`` point into the test's temporary folder: no user's accelerate config is read. Each test has its
own timeout and kills, in a ``finally``, the launcher's process group (while the launcher is unreaped) and
each worker's (the agent starts every worker in a session of its own) after checking the pid still runs
the script. Two jobs, 12-17 s on a two-core machine.
"""

from __future__ import annotations

import contextlib
import os
import re
import time

import pexpect
import pytest

from llmpdb.ranks.launcher import launcher_name

from .pty_session import ROOT, PtySession
from .test_torchrun import _alive, _children, _kill_job, _ranks_once

SCRIPT = "tests/e2e/accelerate_script.py"
LAUNCH = ["-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
          "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0",
          "--monitor_interval", "0.1"]
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "accelerate_script.py"), encoding="utf-8") as _f:
    BREAK_LINE = 1 + next(n for n, line in enumerate(_f, 1) if "breakpoint()  # every rank" in line)  # stops after it


@contextlib.contextmanager
def accelerate_job(tmp_path, *options: str):
    home = tmp_path / "home"
    home.mkdir()
    env = {"PYTHONPATH": ROOT, "PYTHONBREAKPOINT": "llmpdb.set_trace", "ACCELERATE_USE_CPU": "1",
           "HOME": str(home), "HF_HOME": str(home / "hf"), "LLMPDB_RANK_GRACE": "15", "LLMPDB_RANK": None}
    workers: set[int] = set()
    with PtySession(LAUNCH[:2] + list(options) + LAUNCH[2:] + [SCRIPT], env=env, timeout=30) as session:
        try:
            header = session.wait_prompt()
            workers |= set(_children(session.child.pid))
            yield session, header, workers
        finally:
            alive = not session.child.closed and session.child.isalive()  # unreaped: the pid is still ours
            _kill_job(session.child.pid, workers, alive, SCRIPT)
            session.child.close(force=True)


@pytest.mark.timeout(45)
def test_accelerate_launch_rank0_prompts_rank1_waits_at_the_same_line_and_c_releases_both(tmp_path):
    with accelerate_job(tmp_path) as (session, header, workers):
        assert f"accelerate_script.py({BREAK_LINE})<module>()" in header, header
        assert session.child.after == "(llmpdb r0) "
        assert len(workers) == 2
        rows = _ranks_once(session, "r1", "waiting")
        assert rows["r0"].startswith(f"prompt at {SCRIPT}:{BREAK_LINE} (<module>)"), rows
        assert rows["r1"].startswith(f"waiting at {SCRIPT}:{BREAK_LINE} (<module>)"), rows
        assert session.run("p accelerator.process_index, accelerator.num_processes").strip() == "(0, 2)"
        assert re.search(r"^batch\s+\(3, 4\)\s+f32", session.run("shapes"), re.M)
        rest = session.finish("c")
        assert "(llmpdb r" not in rest, rest  # rank 1 never prompted: it continued with rank 0
        assert "rank 0/2: done (DistributedDataParallel, MULTI_CPU)" in rest, rest
        assert "rank 1/2: done (DistributedDataParallel, MULTI_CPU)" in rest, rest
        assert session.exitstatus == 0, rest
        assert "(llmpdb r1)" not in "".join(session.transcript)


@pytest.mark.timeout(45)
def test_accelerate_launch_quit_on_rank0_ends_every_rank_within_a_few_seconds_without_a_restart(tmp_path):
    """Under ``--max_restarts 1`` the elastic agent inside ``accelerate launch`` would start the job again after
    `q`: the quitting rank asks its launcher, named as such, to end the job (it said "asking torchrun")."""
    with accelerate_job(tmp_path, "--max_restarts", "1") as (session, header, workers):
        assert session.child.after == "(llmpdb r0) ", header
        _ranks_once(session, "r1", "waiting")
        started = time.monotonic()
        session.child.sendline("q")
        session.child.expect(pexpect.EOF, timeout=10)
        elapsed = time.monotonic() - started
        session.child.close()
        text = session.child.before
        assert "llmpdb r0: quit on rank 0: every rank of the job ends (exit status 3)" in text, text
        assert re.search(r"llmpdb r0: asking accelerate launch \(pid \d+\) to end the job instead of restarting "
                         r"it \(1 restart\(s\) were left\)", text), text
        assert "(llmpdb r" not in text, text  # no second round of the job prompted again
        assert "/2: done" not in text, text
        assert session.exitstatus not in (0, None)
        assert elapsed < 5, elapsed
        assert len(workers) == 2 and not [pid for pid in workers if _alive(pid)]


@pytest.mark.parametrize("command, name", [
    (b"/usr/bin/python3\0-m\0accelerate.commands.launch\0--multi_gpu\0train.py\0", "accelerate launch"),
    (b"/venv/bin/python\0/venv/bin/accelerate\0launch\0--max_restarts=2\0train.py\0", "accelerate launch"),
    (b"/venv/bin/python\0/venv/bin/torchrun\0--nproc-per-node=2\0train_accelerate.py\0", "torchrun"),
    (b"/usr/bin/python3\0-m\0torch.distributed.run\0deepspeed_train.py\0", "torchrun"),
    (b"/venv/bin/python\0/venv/bin/deepspeed\0train.py\0", "deepspeed"),
])
def test_the_quitting_rank_names_the_launcher_it_asks_to_end_the_job(command, name):
    """`q` under ``--max_restarts`` said "asking torchrun" to the parent ``accelerate launch`` process."""
    assert launcher_name(command) == name
