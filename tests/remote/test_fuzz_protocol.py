"""Fuzzing what llmpdb reads from outside (issue 21), with ``hypothesis`` and bounded time.

- The attach protocol: arbitrary bytes, frames and hello JSON sent over a real loopback TCP connection to a
  real listener (never the right token), and arbitrary frames from an attached client over a real Unix
  socket into the seat the debugger reads its lines from.
- The environment values llmpdb parses: ``LLMPDB_ATTACH_TIMEOUT``, ``LLMPDB_LISTEN`` (with
  ``LLMPDB_LISTEN_PUBLIC``), ``LLMPDB_RANK`` / ``RANK``, ``LLMPDB_RANK_POLL``, ``LLMPDB_RANK_GRACE``,
  ``LLMPDB_DUMP_POLL``, ``LLMPDB_DUMP_MAX_MIB``, ``LLMPDB_SNAPSHOT_LIMIT``, ``LLMPDB_SNAPSHOT_MIB``,
  ``LLMPDB_HISTORY_SIZE``, ``LLMPDB_HEADLESS``.

Properties: no exception escapes (a refused peer is None, a bad address a one-line RemoteError), no peer is
authenticated without the token, nothing a peer sends becomes anything but the text of a command line,
each read ends within its deadline, and every value parsed is finite and within its bounds.
"""

from __future__ import annotations

import json
import math
import os
import socket
import threading
import time

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from llmpdb.remote import frames, listener as remote
from llmpdb.remote.seat import Seat

pytestmark = pytest.mark.timeout(120)

FUZZ = settings(max_examples=80, deadline=3000, suppress_health_check=[HealthCheck.too_slow], derandomize=True)


def _frame(kind: bytes, data: bytes, size: int | None = None) -> bytes:
    return kind[:1].ljust(1, b"H") + (len(data) if size is None else size).to_bytes(4, "big") + data


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=50),
                     lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner,
                                                                                   max_size=5), max_leaves=30)
_hello_json = st.one_of(
    _json.map(lambda value: json.dumps(value).encode()),
    st.fixed_dictionaries({}, optional={"token": st.one_of(st.text(max_size=60), _json), "who": _json,
                                        "columns": _json, "color": _json}).map(lambda v: json.dumps(v).encode()),
    st.integers(1, 3000).map(lambda n: b"[" * n),
    st.integers(1, 3000).map(lambda n: b'{"a":' * n),
    st.binary(max_size=2000),
)
_payload = st.one_of(
    st.binary(max_size=3000),  # raw bytes: any header, any size claimed
    st.tuples(st.binary(min_size=1, max_size=1), _hello_json).map(lambda kd: _frame(kd[0], kd[1])),
    _hello_json.map(lambda data: _frame(b"H", data)),
    st.tuples(_hello_json, st.integers(0, 2**32 - 1)).map(lambda ds: _frame(b"H", ds[0], ds[1])),  # lies about size
    st.lists(_hello_json.map(lambda data: _frame(b"L", data)), max_size=3).map(b"".join),
)


def _send_and_close(address, payload: bytes, family=socket.AF_INET) -> threading.Thread:
    def run():
        try:
            with socket.socket(family, socket.SOCK_STREAM) as sock:
                sock.settimeout(10)
                sock.connect(address)
                sock.sendall(payload)
        except OSError:
            pass

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    saved = {key: os.environ.get(key) for key in ("XDG_RUNTIME_DIR", "LLMPDB_LISTEN_PUBLIC")}
    os.environ["XDG_RUNTIME_DIR"] = str(tmp_path_factory.mktemp("run"))
    os.environ.pop("LLMPDB_LISTEN_PUBLIC", None)
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="module")
def tcp(runtime):
    lines: list[str] = []
    listener = remote.Listener.from_spec("tcp", log=lines.append)
    listener.open()
    listener.lines = lines
    yield listener
    listener.close()


@pytest.fixture(scope="module")
def unix(runtime):
    listener = remote.Listener.from_spec("", log=lambda line: None)
    listener.open()
    yield listener
    listener.close()


@FUZZ
@given(payload=_payload)
def test_no_bytes_from_a_peer_authenticate_it_or_escape(tcp, payload):
    sender = _send_and_close(tcp.address, payload)
    start = time.time()
    conn = tcp.accept_one(time.time() + 5)  # any exception here would end the job
    assert conn is None
    assert time.time() - start < remote.HELLO_SECONDS + 1.5
    sender.join(10)
    assert all(tcp.token not in line and "\n" not in line for line in tcp.lines)
    del tcp.lines[:]


_client_frames = st.lists(st.one_of(
    st.tuples(st.sampled_from("LDIHOPQ?\x00é"), st.text(max_size=300)).map(
        lambda kt: _frame(kt[0].encode("utf-8")[:1], kt[1].encode("utf-8", "surrogatepass"))),
    st.binary(max_size=300),
), max_size=6).map(b"".join)


@FUZZ
@given(data=_client_frames)
def test_an_attached_clients_frames_are_only_ever_command_lines(unix, data):
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(10)
    client.connect(str(unix.path))
    client.sendall(_frame(b"H", b'{"who": "fuzz"}'))
    conn = unix.accept_one(time.time() + 5)
    assert conn is not None
    seat = Seat(unix)
    seat.take(conn)
    client.sendall(data)
    client.close()  # the lines end: readline must then say "" (the client is gone)
    lines, start = [], time.time()
    while True:
        line = seat.stdin.readline()
        assert isinstance(line, str)
        if not line:
            break
        assert line.endswith("\n") and "\n" not in line[:-1]
        lines.append(line)
        assert len(lines) <= 6 and time.time() - start < 5
    assert seat.ended in ("drop", "detach")
    conn.close()


@settings(max_examples=150, deadline=None, derandomize=True)
@given(text=st.text(max_size=2000), limit=st.integers(4, 64))
def test_long_output_is_split_into_frames_under_the_limit(text, limit):
    pieces = frames.split_text(text, limit)
    assert "".join(pieces) == text
    assert all(len(piece.encode("utf-8", "surrogatepass")) <= limit for piece in pieces)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(text=st.text(max_size=3000).map(lambda t: t * 700))  # up to about 8 MB
@example(text="€" * 1_200_000)  # 3.6 MB: four frames
def test_a_frame_round_trip_never_exceeds_the_limit(text):
    left, right = socket.socketpair()
    received, kinds = [], set()
    reader = threading.Thread(target=lambda: _read_all(right, received, kinds), daemon=True)
    reader.start()
    frames.send_frame(left, "O", text)
    left.close()
    reader.join(30)
    right.close()
    assert "".join(received) == text.encode("utf-8", "replace").decode("utf-8")
    assert kinds <= {"O"}


def _read_all(sock, received: list[str], kinds: set[str]) -> None:
    while (frame := frames.recv_frame(sock)) is not None:
        kinds.add(frame[0])
        received.append(frame[1])


# ---- environment values ---------------------------------------------------------------------------------
_env_text = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40),
    st.sampled_from(["inf", "-inf", "nan", "1e400", "1e12", "-1", "0", "-0", "²", "٣", "--5", "9" * 5000,
                     " 5 ", "0x10", "1_000", "+3", "tcp:99999", "tcp:abc", "0.0.0.0:1", "[::]:0", "tcp:²"]),
)


def _with_env(name: str, value: str, call):
    saved = os.environ.get(name)
    os.environ[name] = value
    try:
        return call()
    finally:
        if saved is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved


@settings(max_examples=150, deadline=2000, derandomize=True)
@given(value=_env_text)
def test_environment_numbers_are_bounded_and_never_raise(value):
    from llmpdb.commands.dump import _default_limit
    from llmpdb.commands.statediff import snapshot_limits
    from llmpdb.console.history import history_size
    from llmpdb.headless.policy import MAX_ATTACH_TIMEOUT, _attach_timeout, chosen_policy
    from llmpdb.ranks.dump import _poll_seconds
    from llmpdb.identity import current_rank, interactive_rank
    from llmpdb.ranks.wait import grace_seconds, poll_interval

    def bounded(number, low, high):
        return isinstance(number, (int, float)) and math.isfinite(number) and low <= number <= high

    assert bounded(_with_env("LLMPDB_ATTACH_TIMEOUT", value, _attach_timeout), 0, MAX_ATTACH_TIMEOUT)
    assert bounded(_with_env("LLMPDB_DUMP_POLL", value, _poll_seconds), 0.05, 3600)
    assert bounded(_with_env("LLMPDB_RANK_POLL", value, poll_interval), 0.01, 7 * 24 * 3600)
    assert bounded(_with_env("LLMPDB_RANK_GRACE", value, grace_seconds), 0, 7 * 24 * 3600)
    assert bounded(_with_env("LLMPDB_DUMP_MAX_MIB", value, _default_limit), 0, 10**9)
    assert bounded(_with_env("LLMPDB_HISTORY_SIZE", value, history_size), 0, 10**6)
    for name in ("LLMPDB_SNAPSHOT_LIMIT", "LLMPDB_SNAPSHOT_MIB"):
        count, max_bytes, notes = _with_env(name, value, snapshot_limits)
        assert bounded(count, 1, 10**9) and bounded(max_bytes, 1, 10**9 * 2**20)
    assert bounded(_with_env("LLMPDB_RANK", value, interactive_rank), -10**9, 10**9)
    rank = _with_env("RANK", value, current_rank)
    assert rank is None or bounded(rank, -10**9, 10**9)
    assert _with_env("LLMPDB_HEADLESS", value, chosen_policy) in ("attach", "log", "skip")


@settings(max_examples=200, deadline=2000, derandomize=True)
@given(value=_env_text, public=st.booleans())
def test_listen_addresses_are_a_target_or_one_line(runtime, value, public):
    from llmpdb.remote.address import check_listen, is_loopback

    def check():
        try:
            kind, address = check_listen(value)
        except remote.RemoteError as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 300
            return
        assert kind in ("unix", "tcp")
        if kind == "tcp":
            host, port = address
            assert 0 <= port <= 65535 and host and (public or is_loopback(host))
        else:
            assert address is None or isinstance(address, str)

    _with_env("LLMPDB_LISTEN_PUBLIC", "1" if public else "0", check)
