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
(``SO_PEERCRED``). TCP only when asked (``tcp``, ``tcp:PORT``, ``tcp:HOST:PORT``), bound to 127.0.0.1
unless a host is given; a fixed PORT becomes PORT + LOCAL_RANK under a launcher. Every TCP client must
send the token (``secrets.token_urlsafe``, in the job's log line and in ``job-...token``, mode 0600, in the
per-user directory), compared with ``hmac.compare_digest``, before any byte reaches the debugger; a wrong
or missing token is refused and logged. There is no way to make an unauthenticated listener.

Protocol: frames of one kind byte, a 4-byte big-endian length and UTF-8 text. Client to server: ``H``
hello (JSON: token, colour, columns, who), ``L`` a command line, ``D`` detach. Server to client: ``W``
welcome (JSON), ``O`` output, ``P`` the prompt (input wanted), ``C`` the program continues, ``Q`` the
session is over, ``E`` a refusal (then the server closes).
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

from ..ranks.mixin import current_rank

__all__ = ["Listener", "Connection", "RemoteError", "connect", "socket_dir", "parse_target", "job_name",
           "HELLO_SECONDS"]

HELLO_SECONDS = 10.0          # a connection must say hello (and for TCP, give the token) within this
_HEADER = struct.Struct(">cI")
_MAX_FRAME = 1 << 20
_CRED = struct.Struct("3i")   # struct ucred: pid, uid, gid


class RemoteError(Exception):
    """A listener or connection that cannot be made; the message is one line for the user."""


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


def parse_target(spec: str) -> tuple[str, object]:
    """Usage: ``parse_target("tcp:127.0.0.1:5678")`` -> ``("tcp", ("127.0.0.1", 5678))``; ``"unix"``, ``""``
    or a path -> ``("unix", path-or-None)``; ``tcp`` / ``tcp:PORT`` bind 127.0.0.1 (port 0: any free one)."""
    spec = (spec or "").strip()
    if spec in ("", "unix"):
        return "unix", None
    if spec == "tcp" or spec.startswith("tcp:"):
        parts = spec.split(":")[1:]
        host, port = "127.0.0.1", "0"
        if len(parts) == 1:
            port = parts[0]
        elif len(parts) >= 2:
            host, port = ":".join(parts[:-1]).strip("[]") or "127.0.0.1", parts[-1]
        if not port.isdigit() or int(port) > 65535:
            raise RemoteError(f"bad TCP address {spec!r}: expected tcp, tcp:PORT or tcp:HOST:PORT")
        return "tcp", (host, int(port))
    if spec.startswith("unix:"):
        spec = spec[5:]
    return "unix", spec


# ---- frames ---------------------------------------------------------------------------------------------
def _send(sock: socket.socket, kind: str, text: str) -> None:
    data = text.encode("utf-8", "replace")
    sock.sendall(_HEADER.pack(kind.encode("ascii"), len(data)) + data, getattr(socket, "MSG_NOSIGNAL", 0))


def _recv_exact(sock: socket.socket, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 65536))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _recv(sock: socket.socket, limit: int = _MAX_FRAME) -> tuple[str, str] | None:
    header = _recv_exact(sock, _HEADER.size)
    if header is None:
        return None
    kind, size = _HEADER.unpack(header)
    if size > limit:
        raise RemoteError(f"frame of {size} bytes is over the limit of {limit}")
    body = _recv_exact(sock, size)
    if body is None:
        return None
    return kind.decode("ascii", "replace"), body.decode("utf-8", "replace")


def _peer_uid(sock: socket.socket) -> int:
    """The uid of a Unix socket's peer: ``SO_PEERCRED`` (Linux), ``LOCAL_PEERCRED`` (macOS: struct xucred,
    version then uid); OSError where neither exists, and the connection is refused."""
    if hasattr(socket, "SO_PEERCRED"):
        return _CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))[1]
    if sys.platform == "darwin":
        return struct.unpack("2I", sock.getsockopt(0, 0x001, 76)[:8])[1]
    raise OSError("no way to read a peer's uid on this platform")


def _discard(sock: socket.socket, seconds: float = 0.5, limit: int = 1 << 16) -> None:
    """Read and drop what the peer sent (never interpreted) until it closes, ``seconds`` or ``limit``."""
    sock.settimeout(seconds)
    dropped = 0
    while dropped < limit:
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
        kind, address = parse_target(spec)
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
            except OSError as exc:
                sock.close()
                raise RemoteError(f"cannot listen on {path}: {exc.strerror}") from None
            self.path = path
        else:
            host, port = self.address
            local_rank = os.environ.get("LOCAL_RANK", "")
            if port and local_rank.isdigit():
                port += int(local_rank)
            sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind((host, port))
            except OSError as exc:
                sock.close()
                raise RemoteError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
            self.address = sock.getsockname()[:2]
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
        from ..files.private_file import PrivateFileError, write_private_file

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
        """The exact command a user runs to attach (for TCP it also names the token)."""
        if self.kind == "unix":
            return f"python -m llmpdb attach {self.path}"
        return f"python -m llmpdb attach {self.target()} --token-file {self.token_path} (token {self.token})"

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
        conn = self._authenticate(sock, peer, min(HELLO_SECONDS, max(0.5, deadline - time.time())))
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

    def _authenticate(self, sock: socket.socket, peer, timeout: float) -> Connection | None:
        """The hello frame, the peer's uid (Unix) or token (TCP); None (logged) when refused."""
        where = self._peer_text(sock, peer)
        if self.kind == "unix":
            try:
                uid = _peer_uid(sock)
            except OSError as exc:
                return self._refuse(sock, where, f"cannot read its credentials ({exc.strerror or exc})")
            if uid != os.getuid():
                return self._refuse(sock, where, f"uid {uid} is not this job's uid {os.getuid()}")
        try:
            sock.settimeout(timeout)
            frame = _recv(sock, limit=65536)
        except (OSError, RemoteError):
            frame = None
        hello: dict = {}
        if frame is not None and frame[0] == "H":
            try:
                hello = json.loads(frame[1])
            except ValueError:
                hello = {}
        if not isinstance(hello, dict) or frame is None or frame[0] != "H":
            return self._refuse(sock, where, "no hello (no token)" if self.kind == "tcp" else "no hello")
        if self.kind == "tcp":
            given = hello.get("token")
            if not isinstance(given, str) or not given:
                return self._refuse(sock, where, "no token")
            if not hmac.compare_digest(given.encode("utf-8", "replace"), self.token.encode("ascii")):
                return self._refuse(sock, where, "wrong token")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        sock.settimeout(None)
        who = str(hello.get("who") or "a client")[:200]
        return Connection(sock, who=f"{who} via {where}", hello=hello)

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
