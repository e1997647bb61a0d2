"""The one module that opens sockets: a listener for debugger stops, and the client's connection to it.

Usage (server side, one per process; ``llmpdb.headless.policy`` drives it)::

    listener = Listener.from_spec(os.environ.get("LLMPDB_LISTEN", ""), log=print_to_stderr)
    listener.open()                       # creates the socket (and, for TCP, the token file)
    listener.connect_command()            # "python -m llmpdb attach /run/user/1000/llmpdb/job-4242.sock"
    conn = listener.wait_client(deadline) # an authenticated Connection, or None at the deadline

Client side: ``connect("tcp:127.0.0.1:5678", token)`` / ``connect("/run/.../job-4242.sock")``;
``llmpdb.cli.attach`` lists this user's sockets.

Transports. The default is a Unix socket ``job-PID[-rRANK].sock`` (mode 0600) in a per-user directory,
``$XDG_RUNTIME_DIR/llmpdb`` or ``/tmp/llmpdb-UID`` (created 0700; a directory owned by another user, a
symlink, or one the group or others can enter is refused). A peer of another uid is refused
(``SO_PEERCRED``). TCP only when asked (``llmpdb.remote.address``: ``tcp``, ``tcp:PORT``, ``HOST:PORT``,
``PORT``), bound to 127.0.0.1 unless a host is given (a host other than loopback only with
``LLMPDB_LISTEN_PUBLIC=1``, and a warning); a fixed PORT becomes PORT + LOCAL_RANK under a launcher.
Every TCP client must send the token (``secrets.token_urlsafe``, only in ``job-...token``, mode 0600, in the
per-user directory: never in a log line or a message), compared with ``hmac.compare_digest``, before any
byte reaches the debugger; a wrong or missing token is refused and logged. There is no way to make an
unauthenticated listener.

Protocol (``llmpdb.remote.frames``): frames of one kind byte, a 4-byte big-endian length and UTF-8 text.
Client to server: ``H`` hello (JSON: token, colour, columns, who), ``L`` a command line, ``D`` detach.
Server to client: ``W`` welcome (JSON), ``O`` output (a long one in several frames), ``P`` the prompt (input
wanted), ``C`` the program continues, ``Q`` the session is over, ``E`` a refusal (then the server closes).
Hostile peers: the whole hello (at most ``HELLO_LIMIT`` bytes) must arrive within ``HELLO_SECONDS`` in
total; whatever bytes a peer sends end at most that connection, never the job.
"""

from __future__ import annotations

import errno
import hmac
import json
import os
import secrets
import select
import socket
import stat
import struct
import sys
import time
from pathlib import Path
from typing import Callable

from ..files.private_file import PrivateFileError, write_private_file
from ..identity import current_rank
from .address import RemoteError, check_listen, is_loopback, parse_target
from .frames import HELLO_LIMIT, MAX_FRAME, recv_frame, send_frame

__all__ = ["Listener", "Connection", "RemoteError", "connect", "socket_dir", "parse_target", "job_name",
           "HELLO_SECONDS", "HELD_HELLO_SECONDS"]

HELLO_SECONDS = 10.0          # a connection must send its whole hello (for TCP, with the token) within this
HELD_HELLO_SECONDS = 0.5      # ... while a client holds the session (its commands wait for a newcomer's hello)
_CRED = struct.Struct("3i")   # struct ucred: pid, uid, gid


# ---- the per-user directory and names ----------------------------------------------------------------
def socket_dir(create: bool = False) -> Path:
    """Usage: ``socket_dir(create=True)``; the checked per-user directory (RemoteError if unsafe)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    base = Path(runtime) / "llmpdb" if runtime and os.path.isdir(runtime) else Path(f"/tmp/llmpdb-{os.getuid()}")
    if create:
        try:
            os.mkdir(base, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            raise RemoteError(f"cannot create {base}: {exc.strerror}") from None
    try:
        info = os.lstat(base)
    except FileNotFoundError:
        if create:
            raise RemoteError(f"{base} vanished while being created") from None
        return base
    if not stat.S_ISDIR(info.st_mode):
        raise RemoteError(f"refusing {base}: not a directory (a symlink or a file is never followed)")
    if info.st_uid != os.getuid():
        raise RemoteError(f"refusing {base}: owned by uid {info.st_uid}, not by you (uid {os.getuid()})")
    if info.st_mode & 0o077:
        raise RemoteError(f"refusing {base}: mode {stat.S_IMODE(info.st_mode):04o}, group or others can enter it"
                          " (it must be 0700)")
    return base


def job_name() -> str:
    """Usage: ``job_name()`` -> ``"job-4242"`` or ``"job-4242-r1"`` under a distributed launcher."""
    rank = current_rank()
    return f"job-{os.getpid()}" + (f"-r{rank}" if rank is not None else "")


# ---- frames ---------------------------------------------------------------------------------------------
def _send(sock: socket.socket, kind: str, text: str) -> None:
    send_frame(sock, kind, text)


def _recv(sock: socket.socket, limit: int = MAX_FRAME, deadline: float | None = None) -> tuple[str, str] | None:
    return recv_frame(sock, limit, deadline)


def _clean_hello(value) -> dict | None:
    """The hello's known fields with their types checked (None when it is not a JSON object); nothing else
    of what a peer sent is kept."""
    if not isinstance(value, dict):
        return None
    hello: dict = {}
    if isinstance(value.get("token"), str):
        hello["token"] = value["token"]
    hello["color"] = value.get("color") is True
    columns = value.get("columns")
    if type(columns) is int and 20 <= columns <= 1000:
        hello["columns"] = columns
    who = value.get("who")
    if isinstance(who, str):
        hello["who"] = "".join(c if c.isprintable() else "?" for c in who[:200])
    return hello


def _peer_uid(sock: socket.socket) -> int:
    """The uid of a Unix socket's peer: ``SO_PEERCRED`` (Linux), ``LOCAL_PEERCRED`` (macOS: struct xucred,
    version then uid); OSError where neither exists, and the connection is refused."""
    if hasattr(socket, "SO_PEERCRED"):
        return _CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))[1]
    if sys.platform == "darwin":
        return struct.unpack("2I", sock.getsockopt(0, 0x001, 76)[:8])[1]
    raise OSError("no way to read a peer's uid on this platform")


def _discard(sock: socket.socket, seconds: float = 0.5, limit: int = 1 << 16) -> None:
    """Read and drop what the peer sent (never interpreted) until it closes, ``seconds`` in all or ``limit``."""
    deadline = time.time() + seconds
    dropped = 0
    while dropped < limit:
        left = deadline - time.time()
        if left <= 0:
            return
        sock.settimeout(left)
        chunk = sock.recv(4096)
        if not chunk:
            return
        dropped += len(chunk)


class Connection:
    """One authenticated peer. ``send`` never raises (a failed send marks the connection dead); ``recv``
    returns ``(kind, text)`` or None when the peer is gone."""

    def __init__(self, sock: socket.socket, who: str = "", hello: dict | None = None):
        self.sock = sock
        self.who = who
        self.hello = hello or {}
        self.since = time.time()
        self.alive = True

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, kind: str, text: str = "") -> bool:
        if not self.alive:
            return False
        try:
            _send(self.sock, kind, text)
            return True
        except OSError:
            self.close()
            return False

    def recv(self, timeout: float | None = None) -> tuple[str, str] | None:
        if not self.alive:
            return None
        try:
            self.sock.settimeout(timeout)
            frame = _recv(self.sock)
        except (OSError, RemoteError):
            frame = None
        if frame is None:
            self.close()
        return frame

    def close(self) -> None:
        self.alive = False
        try:
            self.sock.close()
        except OSError:
            pass


# ---- the listener ---------------------------------------------------------------------------------------
class Listener:
    """A socket for the stops of this process; ``log`` receives one line per event worth a log line."""

    def __init__(self, kind: str, address, log: Callable[[str], None]):
        self.kind = kind
        self.address = address
        self.log = log
        self.sock: socket.socket | None = None
        self.path: Path | None = None
        self.token: str | None = None
        self.token_path: Path | None = None

    @classmethod
    def from_spec(cls, spec: str, log: Callable[[str], None]) -> "Listener":
        """RemoteError (one line) for a bad address, or a host other than loopback without the opt-in
        (``llmpdb.remote.address.check_listen``)."""
        kind, address = check_listen(spec)
        return cls(kind, address, log)

    def open(self) -> None:
        """Create the socket; RemoteError (one line) when it cannot be made safely."""
        directory = socket_dir(create=True)
        name = job_name()
        if self.kind == "unix":
            path = Path(self.address) if self.address else directory / f"{name}.sock"
            if len(os.fsencode(path)) > 100:
                raise RemoteError(f"socket path too long for a Unix socket: {path}")
            self._remove_stale(path)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.bind(str(path))
                os.chmod(path, 0o600)
            except (OSError, ValueError) as exc:
                sock.close()
                raise RemoteError(f"cannot listen on {path}: {getattr(exc, 'strerror', None) or exc}") from None
            self.path = path
        else:
            host, port = self.address
            local_rank = os.environ.get("LOCAL_RANK", "").strip()
            if port and local_rank.isascii() and local_rank.isdigit() and len(local_rank) <= 5:
                port += int(local_rank)
            if port > 65535:
                raise RemoteError(f"cannot listen on {host}:{port}: LOCAL_RANK takes the port past 65535")
            sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
            try:  # a job restarted on its port binds at once, past the last one's TIME_WAIT connections
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((host, port))
            except (OSError, ValueError, OverflowError) as exc:
                sock.close()
                raise RemoteError(f"cannot listen on {host}:{port}: {getattr(exc, 'strerror', None) or exc}") from None
            self.address = sock.getsockname()[:2]
            if not is_loopback(host):
                self.log(f"llmpdb: warning: listening on {self.target()}, which other machines may reach "
                         f"(LLMPDB_LISTEN_PUBLIC=1); a peer needs the token, kept only in {directory}")
            self.token = secrets.token_urlsafe(32)
            self.token_path = directory / f"{name}.token"
            self._write_token()
        sock.listen(4)
        self.sock = sock

    def _remove_stale(self, path: Path) -> None:
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return
        if not stat.S_ISSOCK(info.st_mode) or info.st_uid != os.getuid():
            raise RemoteError(f"refusing to replace {path}: not a socket of yours")
        os.unlink(path)

    def _write_token(self) -> None:
        try:  # 0600, a new file renamed into place: never through a link planted at the name
            write_private_file(str(self.token_path), f"{self.token}\n{self.target()}\n")
        except PrivateFileError as exc:
            raise RemoteError(str(exc)) from None

    def target(self) -> str:
        if self.kind == "unix":
            return str(self.path)
        host, port = self.address
        return f"tcp:{host}:{port}"

    def connect_command(self) -> str:
        """The exact command a user runs to attach. For TCP it names the token file (mode 0600, readable by
        this user alone), never the token: the command goes to logs others may read."""
        if self.kind == "unix":
            return f"python -m llmpdb attach {self.path}"
        return f"python -m llmpdb attach {self.target()} --token-file {self.token_path}"

    def pending(self) -> bool:
        """True when a client is waiting to be accepted."""
        if self.sock is None:
            return False
        try:
            return bool(select.select([self.sock], [], [], 0)[0])
        except (OSError, ValueError):
            return False

    def wait_client(self, deadline: float) -> Connection | None:
        """Accept clients until one authenticates (returned) or ``deadline`` (``time.time()``) passes."""
        while self.sock is not None:
            conn = self.accept_one(deadline)
            if conn is not None:
                return conn
            if time.time() >= deadline:
                return None
        return None

    def accept_one(self, deadline: float, holder: Connection | None = None) -> Connection | None:
        """Wait until ``deadline`` for one connection and authenticate it; None when none came or it was
        refused. With ``holder`` set, a newcomer that authenticates is told who holds the session."""
        left = max(0.0, deadline - time.time())
        if self.sock is None:
            return None
        try:
            if not select.select([self.sock], [], [], left)[0]:
                return None
            sock, peer = self.sock.accept()
        except (OSError, ValueError):
            return None
        seconds = HELD_HELLO_SECONDS if holder is not None else min(HELLO_SECONDS, max(0.5, deadline - time.time()))
        try:
            conn = self._authenticate(sock, peer, time.time() + seconds)
        except Exception as exc:  # whatever a peer sends ends that connection, never the job
            conn = self._refuse(sock, "a peer", f"its hello could not be read ({type(exc).__name__})")
        if conn is not None and holder is not None:
            since = time.strftime("%H:%M:%S", time.gmtime(holder.since))
            conn.send("E", f"llmpdb: this job is held by {holder.who} (attached at {since} UTC); "
                           "try again when it detaches")
            self.log(f"llmpdb: told {conn.who} that {holder.who} holds the session")
            try:
                conn.sock.shutdown(socket.SHUT_WR)
                _discard(conn.sock, seconds=0.2)
            except OSError:
                pass
            conn.close()
            return None
        return conn

    def _authenticate(self, sock: socket.socket, peer, deadline: float) -> Connection | None:
        """The hello frame (whole by ``deadline``), the peer's uid (Unix) or token (TCP); None (logged) when
        refused."""
        where = self._peer_text(sock, peer)
        if self.kind == "unix":
            try:
                uid = _peer_uid(sock)
            except OSError as exc:
                return self._refuse(sock, where, f"cannot read its credentials ({exc.strerror or exc})")
            if uid != os.getuid():
                return self._refuse(sock, where, f"uid {uid} is not this job's uid {os.getuid()}")
        try:
            frame = _recv(sock, limit=HELLO_LIMIT, deadline=deadline)
        except (OSError, RemoteError):
            frame = None
        hello = None
        if frame is not None and frame[0] == "H":
            try:
                hello = _clean_hello(json.loads(frame[1]))
            except (ValueError, RecursionError, MemoryError):
                hello = None
        if hello is None:
            return self._refuse(sock, where, "no hello (no token)" if self.kind == "tcp" else "no hello")
        if self.kind == "tcp":
            given = hello.get("token")
            if not isinstance(given, str) or not given:
                return self._refuse(sock, where, "no token")
            if not hmac.compare_digest(given.encode("utf-8", "replace"), self.token.encode("ascii")):
                return self._refuse(sock, where, "wrong token")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        sock.settimeout(None)
        hello.pop("token", None)  # kept nowhere once checked
        return Connection(sock, who=f"{hello.get('who') or 'a client'} via {where}", hello=hello)

    def _peer_text(self, sock: socket.socket, peer) -> str:
        if self.kind == "tcp" and isinstance(peer, tuple):
            return f"{peer[0]}:{peer[1]}"
        return "the Unix socket"

    def _refuse(self, sock: socket.socket, where: str, why: str) -> None:
        self.log(f"llmpdb: refused a connection from {where}: {why}; nothing was run")
        try:
            _send(sock, "E", f"llmpdb: refused: {why}")
            sock.shutdown(socket.SHUT_WR)
            _discard(sock)  # closing with unread bytes would reset the connection before the client reads why
        except OSError:
            pass
        sock.close()
        return None

    def close(self) -> None:
        """Close the socket and remove its file and the token file."""
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None
        for path in (self.path, self.token_path):
            if path is not None:
                try:
                    os.unlink(path)
                except OSError:
                    pass


# ---- the client side ------------------------------------------------------------------------------------
def connect(target: str, timeout: float = 10.0) -> socket.socket:
    """Usage: ``connect("/run/user/1000/llmpdb/job-4242.sock")`` / ``connect("tcp:host:5678")``; a connected
    socket (RemoteError with one line when it cannot connect)."""
    kind, address = parse_target(target)
    try:
        if kind == "unix":
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout)
            sock.connect(str(address))
        else:
            sock = socket.create_connection(address, timeout=timeout)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if exc.errno in (errno.ENOENT, errno.ECONNREFUSED):
            reason += " (is the job still waiting at a stop?)"
        raise RemoteError(f"cannot connect to {target}: {reason}") from None
    sock.settimeout(None)
    return sock
