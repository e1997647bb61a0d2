"""A listener against hostile peers and settings, over real sockets on loopback and in a 0700 directory:
a hello that cannot be parsed, a peer that drips its hello, addresses that look like ports, a host other than
loopback, a port in TIME_WAIT, output over the frame limit, attach timeouts that select() refuses."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from llmpdb.remote import listener as remote
from llmpdb.remote.seat import Seat

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def runtime(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.delenv("LLMPDB_LISTEN_PUBLIC", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def tcp(runtime):
    lines: list[str] = []
    listener = remote.Listener.from_spec("tcp", log=lines.append)
    listener.lines = lines
    listener.open()
    yield listener
    listener.close()


def _frame(kind: str, data: bytes) -> bytes:
    return kind.encode() + len(data).to_bytes(4, "big") + data


def _peer(address, payload: bytes, drip: float = 0.0, hold: float = 0.0) -> threading.Thread:
    def run():
        with socket.create_connection(tuple(address), timeout=30) as sock:
            try:
                if drip:
                    for byte in payload:
                        sock.sendall(bytes([byte]))
                        time.sleep(drip)
                else:
                    sock.sendall(payload)
                time.sleep(hold)
            except OSError:
                pass

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_hello_of_60kb_of_brackets_ends_that_connection_not_the_job(tcp):
    _peer(tcp.address, _frame("H", b"[" * 60_000))
    assert tcp.accept_one(time.time() + 10) is None  # before: RecursionError out of _authenticate
    assert any("refused a connection from 127.0.0.1" in line for line in tcp.lines), tcp.lines


@pytest.mark.parametrize("hello", [b'{"token": 5}', b'[1, 2]', b'"x"', b'{"who": {"a": [1]}, "token": null}',
                                   b"\xff\xfe", b"{" * 1000 + b"}" * 1000])
def test_hellos_that_are_not_a_token_are_refused(tcp, hello):
    _peer(tcp.address, _frame("H", hello))
    assert tcp.accept_one(time.time() + 10) is None


def test_a_peer_dripping_its_hello_is_cut_at_one_total_deadline(tcp, monkeypatch):
    monkeypatch.setattr(remote, "HELLO_SECONDS", 1.0)
    hello = _frame("H", json.dumps({"token": "x" * 40}).encode())
    _peer(tcp.address, hello, drip=0.3)  # 0.3 s a byte: each recv is in time, the whole hello never is
    start = time.time()
    assert tcp.accept_one(time.time() + 30) is None
    assert time.time() - start < 2.5  # before: held until the peer stopped (about 17 s)


def test_the_attached_clients_commands_go_first_while_a_newcomer_drips(tcp):
    holder = socket.create_connection(tcp.address, timeout=10)
    holder.sendall(_frame("H", json.dumps({"token": tcp.token, "who": "me"}).encode()))
    conn = tcp.accept_one(time.time() + 10)
    assert conn is not None and conn.who == "me via 127.0.0.1:" + str(holder.getsockname()[1])
    seat = Seat(tcp)
    seat.take(conn)
    _peer(tcp.address, _frame("H", b'{"token": "' + b"y" * 60 + b'"}'), drip=0.5)
    time.sleep(0.3)  # the newcomer is queued before the stop reads a line
    holder.sendall(_frame("L", b"p 1"))
    start = time.time()
    assert seat.stdin.readline() == "p 1\n"
    assert time.time() - start < 2.0  # before: the newcomer's hello held the line for 10 s or more
    holder.close()


def test_output_over_the_frame_limit_arrives_in_pieces_and_the_client_stays(tcp):
    client = socket.create_connection(tcp.address, timeout=10)
    client.sendall(_frame("H", json.dumps({"token": tcp.token}).encode()))
    conn = tcp.accept_one(time.time() + 10)
    seat = Seat(tcp)
    seat.take(conn)
    text = "é" * 1_500_000 + "\n"  # 3 MB of UTF-8
    seat.stdout.write(text)
    seat.stdout.flush()
    received, sizes = "", []
    client.settimeout(10)
    while len(received) < len(text):
        frame = remote._recv(client)  # before: RemoteError, frame over the limit (the client dropped)
        assert frame is not None and frame[0] == "O"
        sizes.append(len(frame[1].encode()))
        received += frame[1]
    assert received == text and len(sizes) > 1 and max(sizes) <= 1 << 20
    assert conn.alive
    client.close()
    conn.close()


@pytest.mark.parametrize("spec, expected", [
    ("127.0.0.1:5678", ("tcp", ("127.0.0.1", 5678))), ("5678", ("tcp", ("127.0.0.1", 5678))),
    ("localhost:0", ("tcp", ("localhost", 0))), ("[::1]:7", ("tcp", ("::1", 7))),
    ("unix:5678", ("unix", "5678")), ("./5678", ("unix", "./5678")),
])
def test_host_port_and_port_are_tcp(spec, expected):
    assert remote.parse_target(spec) == expected


@pytest.mark.parametrize("spec", ["tcp:99999", "tcp:abc", "99999", "tcp:²", "tcp:" + "9" * 5000, "1.2.3.4:99999"],
                         ids=["99999", "abc", "bare-99999", "superscript", "5000-digits", "host-99999"])
def test_bad_ports_are_one_line(spec):
    with pytest.raises(remote.RemoteError, match="bad TCP address") as info:
        remote.parse_target(spec)
    assert "\n" not in str(info.value) and len(str(info.value)) < 200


def test_listen_on_host_port_makes_no_file_in_the_cwd(runtime):
    listener = remote.Listener.from_spec("127.0.0.1:0", log=print)
    listener.open()
    try:
        assert listener.kind == "tcp" and listener.target().startswith("tcp:127.0.0.1:")
        assert not (runtime / "127.0.0.1:0").exists()
    finally:
        listener.close()


@pytest.mark.parametrize("spec", ["tcp:0.0.0.0:0", "0.0.0.0:0", "tcp:[::]:0", "tcp:example.org:0"])
def test_a_host_other_than_loopback_needs_the_opt_in(runtime, monkeypatch, spec):
    with pytest.raises(remote.RemoteError, match="LLMPDB_LISTEN_PUBLIC=1"):
        remote.Listener.from_spec(spec, log=print)


def test_with_the_opt_in_a_public_host_listens_and_warns(runtime, monkeypatch):
    monkeypatch.setenv("LLMPDB_LISTEN_PUBLIC", "1")
    lines: list[str] = []
    listener = remote.Listener.from_spec("tcp:0.0.0.0:0", log=lines.append)
    listener.open()
    try:
        assert any(line.startswith("llmpdb: warning: listening on tcp:0.0.0.0:") for line in lines), lines
        assert listener.token not in "".join(lines) + listener.connect_command()
    finally:
        listener.close()


def test_the_connect_command_never_holds_the_token(tcp):
    assert tcp.token not in tcp.connect_command()
    assert f"--token-file {tcp.token_path}" in tcp.connect_command()
    assert all(tcp.token not in line for line in tcp.lines)


def test_a_job_restarted_on_its_port_listens_at_once(runtime):
    first = remote.Listener.from_spec("tcp:0", log=print)
    first.open()
    port = first.address[1]
    client = socket.create_connection(first.address, timeout=10)
    client.sendall(_frame("H", json.dumps({"token": first.token}).encode()))
    conn = first.accept_one(time.time() + 10)
    conn.close()  # the job's side closes first: its end of the connection stays in TIME_WAIT
    client.recv(16)
    client.close()
    first.close()
    second = remote.Listener.from_spec(f"tcp:{port}", log=print)
    try:
        second.open()  # before: cannot listen on 127.0.0.1:PORT: Address already in use
        assert second.address[1] == port
    finally:
        second.close()


@pytest.mark.parametrize("value", ["inf", "1e12", "1e400", "nan", "-1", "abc", "-inf"])
def test_attach_timeouts_select_refuses_become_a_bounded_wait(runtime, monkeypatch, value):
    from llmpdb.headless import policy

    monkeypatch.setenv("LLMPDB_ATTACH_TIMEOUT", value)
    seconds = policy._attach_timeout()
    assert 0 <= seconds <= policy.MAX_ATTACH_TIMEOUT
    listener = remote.Listener.from_spec("", log=print)
    listener.open()
    try:
        client = socket.socket(socket.AF_UNIX)
        client.connect(str(listener.path))
        client.sendall(_frame("H", b"{}"))
        conn = listener.wait_client(time.time() + seconds)  # before: OverflowError in select for inf / 1e12
        assert conn is not None
        conn.close()
        client.close()
    finally:
        listener.close()
