"""The attach client's readline history (``~/.llmpdb_attach_history``, ``LLMPDB_PROMPT=plain``) when the
name holds a planted symbolic link or a FIFO: before, readline wrote the history through the link (the
victim file was overwritten) and blocked reading the FIFO. Now it is refused in one line and the session
works. A real job, a real client in a pty."""

from __future__ import annotations

import os
import stat

import pexpect
import pytest

from .test_remote import Job, client, jobs  # noqa: F401  (jobs: the fixture that kills what it started)

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("planted", ["symlink", "fifo", "none"])
def test_the_history_file_is_never_written_through_a_link(tmp_path, jobs, planted):  # noqa: F811
    home = tmp_path / "home"
    home.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("secret\n")
    os.chmod(victim, 0o644)
    history = home / ".llmpdb_attach_history"
    if planted == "symlink":
        history.symlink_to(victim)
    elif planted == "fifo":
        os.mkfifo(history)
    jobs.append(job := Job(tmp_path, LLMPDB_HEADLESS="attach", LLMPDB_ATTACH_TIMEOUT="60"))
    with client(job.attach_args(), {**job.env, "LLMPDB_PROMPT": "plain"}, str(home)) as s:
        first = s.wait_prompt()
        assert "attached to pid" in first
        if planted != "none":
            assert first.count(".llmpdb_attach_history") == 1 and "history is not kept" in first, first
        assert "42" in s.run("p total")
        s.child.sendline("c")
        s.child.expect("llmpdb: the program stopped at")
        s.wait_prompt()
        s.child.sendline("c")
        s.child.expect(pexpect.EOF)
    assert job.finish()[0] == 0
    assert victim.read_text() == "secret\n" and stat.S_IMODE(os.stat(victim).st_mode) == 0o644
    if planted == "none":
        assert stat.S_IMODE(os.stat(history).st_mode) == 0o600 and "p total" in history.read_text()
    else:
        assert history.is_symlink() or stat.S_ISFIFO(os.lstat(history).st_mode)
