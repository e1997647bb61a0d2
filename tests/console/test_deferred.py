"""The first prompt is drawn before prompt_toolkit loads; the first key waits unread, and the terminal's
mode is what it was (``llmpdb.console.deferred``), on a real pseudo-terminal."""

import os
import termios
import threading
import time

import pytest

from llmpdb.console.deferred import wait_for_first_key


@pytest.fixture
def terminal():
    leader, follower = os.openpty()
    stdin = os.fdopen(follower, "r", closefd=False)
    stdout = os.fdopen(os.dup(follower), "w")
    yield leader, stdin, stdout
    stdout.close()
    stdin.close()
    os.close(follower)
    os.close(leader)


def _read_all(fd: int, wait: float = 0.3) -> bytes:
    import select

    data = b""
    while select.select([fd], [], [], wait)[0]:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return data


def test_prompt_first_then_the_loader_then_the_key_unread_and_unechoed(terminal):
    leader, stdin, stdout = terminal
    before = termios.tcgetattr(stdin.fileno())
    loaded, seen_mode = threading.Event(), []

    def meanwhile():
        seen_mode.append(termios.tcgetattr(stdin.fileno())[3])
        loaded.set()

    result = []
    waiter = threading.Thread(target=lambda: result.append(wait_for_first_key("(llmpdb) ", stdin, stdout,
                                                                             meanwhile)))
    waiter.start()
    assert _read_all(leader, 1.0).startswith(b"(llmpdb) ")  # drawn before any key
    assert loaded.wait(5) and waiter.is_alive()  # the editor loads while it waits for a key
    assert not seen_mode[0] & (termios.ECHO | termios.ICANON | termios.ISIG)
    os.write(leader, b"p x\r")
    waiter.join(5)
    assert result == [True]
    assert _read_all(leader) == b"\r"  # no echo of the keys, only the return to the line's start
    assert termios.tcgetattr(stdin.fileno()) == before  # the mode is put back
    assert os.read(stdin.fileno(), 16) == b"p x\r"  # unread, as typed (Enter is \r to the editor)


def test_a_stream_that_is_not_a_terminal_defers_nothing(tmp_path):
    with open(tmp_path / "in", "w+") as stdin, open(tmp_path / "out", "w") as stdout:
        assert wait_for_first_key("(llmpdb) ", stdin, stdout) is False
    assert (tmp_path / "out").read_text() == ""
