"""`ranks --job` without torch and without polling (#23): the plain-socket store client against a real
c10d TCPStore server and against a hostile one on loopback, every rank's watcher answering one request
in one wait, a rank that never answers, the watcher's wait ended at exit.

Usage::

    python -m pytest tests/ranks/test_job_dumps.py -q
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import threading
import time
from datetime import timedelta

import pytest

dist = pytest.importorskip("torch.distributed")

from llmpdb.debugger.core import Pdb  # noqa: E402
from llmpdb.ranks import dump  # noqa: E402
from llmpdb.ranks.store import RankJob, torchrun_prefix  # noqa: E402
from llmpdb.ranks.wire import MAX_VALUE, WireError, WireStore  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def server():
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=10))
    yield store


def test_the_wire_client_reads_and_writes_what_a_prefix_store_of_torch_does(server):
    torch_side = dist.PrefixStore("llmpdb/run/0/", server)
    wire = WireStore("127.0.0.1", server.port, prefix="llmpdb/run/0/", timeout=5)
    try:
        torch_side.set("rank/0", '{"rank": 0}')
        assert wire.check(["rank/0"]) and not wire.check(["rank/1"]) and not wire.check(["rank/0", "rank/1"])
        assert wire.get("rank/0") == b'{"rank": 0}'
        assert wire.add("events", 3) == 3 and torch_side.add("events", 1) == 4 and wire.add("events", 0) == 4
        wire.set("dump/1/0", "é text")
        assert torch_side.get("dump/1/0").decode() == "é text"
        torch_side.set("b", "22")
        assert wire.multi_get(["dump/1/0", "b"]) == ["é text".encode(), b"22"]
        threading.Timer(0.2, torch_side.set, ("late", "1")).start()
        started = time.monotonic()
        wire.wait(["b", "late"])
        assert 0.1 < time.monotonic() - started < 5
    finally:
        wire.close()


def _hostile(answer: bytes) -> tuple[socket.socket, threading.Thread]:
    listener = socket.create_server(("127.0.0.1", 0))

    def serve():
        conn, _ = listener.accept()
        with conn:
            time.sleep(0.1)
            conn.recv(4096)  # the validation and the query, sent at once
            conn.sendall(answer)
            if not answer:
                time.sleep(0.5)  # silent past the client's timeout

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread


@pytest.mark.timeout(20)
@pytest.mark.parametrize("answer, said", [(struct.pack("<Q", MAX_VALUE + 1), "at most"),
                                          (struct.pack("<Q", 100) + b"short", "closed"),
                                          (b"", "did not answer")])
def test_the_wire_client_bounds_what_a_hostile_server_sends(answer, said):
    listener, thread = _hostile(answer)
    try:
        wire = WireStore("127.0.0.1", listener.getsockname()[1], timeout=0.3)
        with pytest.raises(WireError, match=said):
            wire.get("rank/0")
        wire.close()
    finally:
        thread.join(5)
        listener.close()


@pytest.mark.timeout(20)
def test_a_server_that_sends_a_byte_at_a_time_is_cut_off_at_the_timeout_for_the_whole_answer():
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve():
        conn, _ = listener.accept()
        with conn:
            conn.recv(4096)
            try:
                for byte in struct.pack("<Q", 64) + b"x" * 64:  # each byte well inside a 0.5 s socket timeout
                    if stop.wait(0.1):
                        return
                    conn.sendall(bytes([byte]))
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        wire = WireStore("127.0.0.1", listener.getsockname()[1], timeout=0.5)
        start = time.monotonic()
        with pytest.raises(WireError, match="did not answer"):
            wire.get("rank/0")
        assert time.monotonic() - start < 2.0  # 72 bytes at 0.1 s each would be 7 s
        wire.close()
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def test_the_command_line_side_does_not_import_torch():
    code = "import sys; from llmpdb.ranks import jobs; print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True,
                         text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def _debugger(out):
    return Pdb(stdout=out, nosigint=True, readrc=False, headless_tour=[], color=False, width=100)


@pytest.mark.timeout(30)
def test_every_watcher_answers_one_request_at_once_and_a_silent_rank_is_none(server, monkeypatch):
    """Ranks 0 and 1 watch through their own connections (torchrun's environment); rank 2 never started one:
    the asker gets both answers, then None for rank 2 after the timeout, on a fresh connection."""
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(server.port))
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "bench")
    monkeypatch.delenv("LLMPDB_DUMP_POLL", raising=False)
    prefix = torchrun_prefix()
    jobs = [RankJob(dist.PrefixStore(prefix, server), rank, 3, 0, "torchrun store test") for rank in (0, 1)]
    stops = [dump.start_watcher(job, _debugger) for job in jobs]
    try:
        assert all(stops), "a watcher did not start"
        time.sleep(0.3)  # both wait on dump/go/1
        asker = WireStore("127.0.0.1", server.port, prefix=prefix, timeout=5)
        started = time.monotonic()
        fresh = []
        answers = dump.request_dumps(asker, 3, timeout=1.0,
                                     reconnect=lambda: fresh.append(1) or WireStore("127.0.0.1", server.port,
                                                                                    prefix=prefix, timeout=5))
        assert 0.9 < time.monotonic() - started < 5 and fresh == [1]
        assert answers[2] is None
        for rank in (0, 1):
            text = answers[rank]
            assert text is not None and "main thread at " in text and "--- stack-model" in text, answers
            assert "--- shapes" in text and "test_job_dumps.py" in text, text
        answers = dump.request_dumps(WireStore("127.0.0.1", server.port, prefix=prefix, timeout=5), 2, timeout=5)
        assert all(answers.values()), answers  # the next request, answered from the first wait on
    finally:
        threads = [thread for thread in threading.enumerate() if thread.name == "llmpdb-rank-watcher"]
        for stop in stops:
            if stop is not None:
                stop()
    assert not any(thread.is_alive() for thread in threads)  # closing the connection ended each wait
