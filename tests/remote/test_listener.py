"""``llmpdb.remote.listener``: the per-user socket directory is refused unless it is ours and 0700; addresses parse;
``python -m llmpdb attach`` with no target lists the live jobs; the headless policy is read from the
environment."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from llmpdb.remote import listener as remote
from llmpdb.headless.policy import chosen_policy, input_is_absent

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def runtime(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    return tmp_path


def test_the_directory_is_created_0700(runtime):
    path = remote.socket_dir(create=True)
    assert path == runtime / "llmpdb"
    assert os.stat(path).st_mode & 0o777 == 0o700


def test_a_directory_others_can_enter_is_refused(runtime):
    (runtime / "llmpdb").mkdir(mode=0o755)
    os.chmod(runtime / "llmpdb", 0o755)
    with pytest.raises(remote.RemoteError, match=r"mode 0755, group or others can enter it"):
        remote.socket_dir(create=True)


def test_a_symlink_is_refused(runtime, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    os.chmod(elsewhere, 0o700)
    (runtime / "llmpdb").symlink_to(elsewhere)
    with pytest.raises(remote.RemoteError, match="not a directory"):
        remote.socket_dir(create=True)


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to chown")
def test_a_directory_of_another_user_is_refused(runtime):
    (runtime / "llmpdb").mkdir(mode=0o700)
    os.chown(runtime / "llmpdb", 65534, 65534)
    with pytest.raises(remote.RemoteError, match=r"owned by uid 65534, not by you"):
        remote.socket_dir(create=True)


def test_without_xdg_runtime_dir_the_directory_is_per_uid_in_tmp(monkeypatch):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    assert str(remote.socket_dir()) == f"/tmp/llmpdb-{os.getuid()}"


@pytest.mark.parametrize("spec, expected", [
    ("", ("unix", None)), ("unix", ("unix", None)), ("/x/y.sock", ("unix", "/x/y.sock")),
    ("tcp", ("tcp", ("127.0.0.1", 0))), ("tcp:5678", ("tcp", ("127.0.0.1", 5678))),
    ("tcp:0.0.0.0:5678", ("tcp", ("0.0.0.0", 5678))), ("tcp:[::1]:7", ("tcp", ("::1", 7))),
])
def test_addresses(spec, expected):
    assert remote.parse_target(spec) == expected


@pytest.mark.parametrize("spec", ["tcp:host:port", "tcp:99999"])
def test_bad_addresses_are_one_line(spec):
    with pytest.raises(remote.RemoteError, match="bad TCP address"):
        remote.parse_target(spec)


def test_a_listener_socket_is_0600_and_named_after_the_job(runtime, monkeypatch):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    listener = remote.Listener.from_spec("", log=print)
    listener.open()
    try:
        assert listener.path.name == f"job-{os.getpid()}-r3.sock"
        assert os.stat(listener.path).st_mode & 0o777 == 0o600
        assert listener.connect_command() == f"python -m llmpdb attach {listener.path}"
    finally:
        listener.close()
    assert not listener.path.exists()


def test_attach_without_a_target_lists_live_jobs(runtime):
    listener = remote.Listener.from_spec("", log=print)
    listener.open()
    try:
        env = {**os.environ, "PYTHONPATH": ROOT}
        listed = subprocess.run([sys.executable, "-m", "llmpdb", "attach"], env=env, capture_output=True,
                                text=True, timeout=60)
    finally:
        listener.close()
    assert listed.returncode == 0, listed.stderr
    assert f"pid {os.getpid()}" in listed.stdout
    assert f"python -m llmpdb attach {listener.path}" in listed.stdout
    empty = subprocess.run([sys.executable, "-m", "llmpdb", "attach"], env=env, capture_output=True, text=True,
                           timeout=60)
    assert "no attachable jobs of " in empty.stdout


def test_attach_to_nothing_is_one_line(runtime):
    env = {**os.environ, "PYTHONPATH": ROOT}
    result = subprocess.run([sys.executable, "-m", "llmpdb", "attach", str(runtime / "nope.sock")], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip().startswith("llmpdb attach: cannot connect to ")
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("env, expected", [
    ({}, "attach"), ({"LLMPDB_HEADLESS": "skip"}, "skip"), ({"LLMPDB_TOUR": "kv"}, "log"),
    ({"CI": "true"}, "log"), ({"LLMPDB_HEADLESS": "attach", "CI": "1"}, "attach"), ({"LLMPDB_HEADLESS": "x"}, "log"),
])
def test_the_policy_from_the_environment(monkeypatch, env, expected):
    for key in ("LLMPDB_HEADLESS", "LLMPDB_TOUR", "CI"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert chosen_policy() == expected


def test_devnull_and_closed_streams_hold_no_input(tmp_path):
    import io

    with open(os.devnull) as null:
        assert input_is_absent(null)
    closed = open(tmp_path / "f", "w")
    closed.close()
    assert input_is_absent(closed) and input_is_absent(None)
    assert not input_is_absent(io.StringIO("c\n"))
    with open(tmp_path / "f") as regular:
        assert not input_is_absent(regular)
