"""``python -m llmpdb attach PATH`` where PATH is not the job's own socket: a symbolic link to it, and a
forwarded socket as ``ssh -L /tmp/local.sock:/run/user/UID/llmpdb/job-PID.sock host`` makes one (a process
of the same user listens at the local path and, per connection, connects to the job's socket and copies
bytes both ways; the job's peer-uid check sees that process's uid, as it sees sshd's session process, which
runs as the user who logged in). No sshd here: the relay below does what the two ends of the tunnel do."""

from __future__ import annotations

import os
import socket
import tempfile
import threading

import pexpect
import pytest

from .test_remote import Job, client, jobs  # noqa: F401 (jobs: the fixture)

pytestmark = pytest.mark.timeout(120)


class Relay:
    """A Unix-socket forwarder: listens at ``path``, connects each client to ``target``."""

    def __init__(self, path: str, target: str):
        self.target, self.threads = target, []
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(path)
        os.chmod(path, 0o600)  # ssh's StreamLocalBindMask (0177) gives the same mode
        self.server.listen(1)
        self._spawn(self._accept)

    def _spawn(self, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        self.threads.append(thread)

    def _accept(self) -> None:
        try:
            while True:
                near, _ = self.server.accept()
                far = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                far.connect(self.target)
                self._spawn(self._pump, near, far)
                self._spawn(self._pump, far, near)
        except OSError:
            return

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock, how in ((sink, socket.SHUT_WR), (source, socket.SHUT_RD)):
                try:
                    sock.shutdown(how)
                except OSError:
                    pass

    def close(self) -> None:
        self.server.close()


def attach_through(job: Job, local: str, home: str) -> None:
    with client([local], job.env, home) as s:
        first = s.wait_prompt()
        assert "attached to pid" in first and "job.py(7)work()" in first
        assert s.run("p total").strip() == "42"
        assert "job.py(9)work()" in s.run("c")  # still attached through PATH at the next stop
        s.child.sendeof()
        s.child.expect(pexpect.EOF)
        assert "detached; the program continues" in s.child.before
    status, out = job.finish()
    assert status == 0 and "result 43" in out


def test_attach_through_a_symlink_to_the_socket(tmp_path, jobs):
    jobs.append(job := Job(tmp_path, LLMPDB_HEADLESS="attach", LLMPDB_ATTACH_TIMEOUT="60"))
    real = job.attach_args()[0]
    local = os.path.join(job.run_dir, "local.sock")
    os.symlink(real, local)
    attach_through(job, local, str(tmp_path))


def test_attach_through_a_forwarded_socket_path(tmp_path, jobs):
    jobs.append(job := Job(tmp_path, LLMPDB_HEADLESS="attach", LLMPDB_ATTACH_TIMEOUT="60"))
    real = job.attach_args()[0]
    local_dir = tempfile.mkdtemp(prefix="lf", dir="/tmp")  # short: Unix socket paths are limited
    relay = Relay(os.path.join(local_dir, "local.sock"), real)
    try:
        attach_through(job, os.path.join(local_dir, "local.sock"), str(tmp_path))
    finally:
        relay.close()
        os.unlink(os.path.join(local_dir, "local.sock"))
        os.rmdir(local_dir)
    assert "attached" in job.stderr()
