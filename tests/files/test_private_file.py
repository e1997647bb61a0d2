"""The one hardened opener (``llmpdb.files.private_file``): real symbolic links, FIFOs, devices, hard links
and files of another owner; nothing is followed, nothing blocks, what is written is 0600."""

from __future__ import annotations

import os
import stat

import pytest

from llmpdb.files.private_file import PrivateFileError, append_private, open_private, read_bounded, write_private_file

pytestmark = pytest.mark.timeout(30)
APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT


def test_append_creates_0600_and_tightens_an_existing_0644(tmp_path):
    fresh, old = tmp_path / "fresh.log", tmp_path / "old.log"
    old.write_text("before\n")
    os.chmod(old, 0o644)
    for path in (fresh, old):
        with append_private(path) as log:
            log.write("line\n")
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert old.read_text() == "before\nline\n"


def test_a_symbolic_link_is_never_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("secret\n")
    os.chmod(victim, 0o644)
    (tmp_path / "link").symlink_to(victim)
    with pytest.raises(PrivateFileError, match="symbolic link"):
        append_private(tmp_path / "link")
    with pytest.raises(PrivateFileError, match="symbolic link"):
        write_private_file(str(tmp_path / "link"), "x")
    with pytest.raises(PrivateFileError, match="symbolic link"):
        read_bounded(tmp_path / "link", 100)
    assert victim.read_text() == "secret\n" and stat.S_IMODE(os.stat(victim).st_mode) == 0o644


@pytest.mark.parametrize("reader", [False, True])
def test_a_fifo_is_refused_without_blocking(tmp_path, reader):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    if reader:  # a reader present: the open itself would succeed, fstat must refuse it
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(PrivateFileError, match="FIFO"):
            open_private(fifo, APPEND)
        with pytest.raises(PrivateFileError, match="FIFO"):
            read_bounded(fifo, 100)  # a read-only open of a FIFO without a writer blocks in plain open()
    finally:
        if reader:
            os.close(fd)


@pytest.mark.parametrize("device", ["/dev/full", "/dev/zero", "/dev/null"])
def test_devices_are_refused(device):
    with pytest.raises(PrivateFileError, match="character device"):
        open_private(device, APPEND)
    with pytest.raises(PrivateFileError, match="character device"):
        read_bounded(device, 100)


def test_directory_and_oversized_file_are_refused(tmp_path):
    with pytest.raises(PrivateFileError, match="directory"):
        read_bounded(tmp_path, 100)
    big = tmp_path / "big"
    big.write_bytes(b"x" * 101)
    with pytest.raises(PrivateFileError, match="more than 100 bytes"):
        read_bounded(big, 100)
    assert read_bounded(big, 101) == b"x" * 101


def test_a_hard_link_and_a_file_of_another_user_are_not_appended_to(tmp_path):
    target = tmp_path / "target"
    target.write_text("mine\n")
    os.link(target, tmp_path / "alias")
    with pytest.raises(PrivateFileError, match="hard link"):
        open_private(tmp_path / "alias", APPEND)
    if os.geteuid() != 0:
        pytest.skip("chown to another uid needs root")
    other = tmp_path / "other"
    other.write_text("theirs\n")
    os.chown(other, 54321, 54321)
    with pytest.raises(PrivateFileError, match="uid 54321"):
        open_private(other, APPEND)
    assert other.read_text() == "theirs\n" and target.read_text() == "mine\n"


def test_the_history_module_uses_the_same_opener():
    from llmpdb.console import history

    assert not hasattr(history, "open_regular") and history.open_private is open_private
