"""A client of torch's c10d ``TCPStore`` in plain Python sockets: ``ranks --job`` without importing torch.

Usage::

    store = WireStore("127.0.0.1", 29500, prefix="llmpdb/<run>/0/", timeout=10)
    store.check(["rank/0"]); store.get("rank/0"); store.add("dump/request", 1); store.set("k", "v")
    store.multi_get(["dump/3/0", "dump/3/1"])  # one round trip; every key must exist (``check`` first)
    store.wait(["dump/3/0", "dump/3/1"])       # blocks in ``recv`` (the GIL released) until all are set
    store.close()                              # from another thread too: a blocked ``wait`` then raises

Importing torch costs the command line about 2 s; this speaks the store's wire protocol
(``torch/csrc/distributed/c10d/TCPStoreBackend.hpp``): a one-byte query type, strings and byte vectors as a
little-endian uint64 length and the bytes, integers as int64. Keys are written as ``PrefixStore`` and
``TCPStore`` write them: ``<prefix>/<key>`` with the store's own ``/`` in front. The server is outside
input: every value read is bounded (``MAX_VALUE``) and every read has the timeout; a short read, an
oversized length or an unknown answer raises ``WireError``.
"""

from __future__ import annotations

import socket
import struct
import time

__all__ = ["WireStore", "WireError", "MAX_VALUE"]

MAX_VALUE = 16 * 1024 * 1024  # no answer llmpdb asks for is larger (a rank's dump is a few kB)
_VALIDATE, _SET, _GET, _ADD, _CHECK, _WAIT, _MULTI_GET = 0, 1, 3, 4, 5, 6, 10
_MAGIC = 0x3C85F7CE
_READY, _STOP_WAITING = 0, 0


class WireError(OSError):
    """The store did not answer as a c10d TCPStore does (closed, timed out, or malformed)."""


def _string(data: bytes) -> bytes:
    return struct.pack("<Q", len(data)) + data


class WireStore:
    """One connection to a TCPStore server; the method names and answers follow ``torch.distributed.Store``."""

    def __init__(self, host: str, port: int, *, prefix: str = "", timeout: float = 10.0):
        self.prefix = prefix
        try:
            self._sock = socket.create_connection((host, int(port)), timeout=timeout)
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError as exc:
            raise WireError(f"cannot reach the store at {host}:{port}: {exc}") from None
        self._send(struct.pack("<BI", _VALIDATE, _MAGIC))

    def _key(self, key: str) -> bytes:
        # PrefixStore joins "<prefix>/<key>"; TCPStore puts "/" in front of every key
        full = f"{self.prefix}/{key}" if self.prefix else key
        return _string(("/" + full).encode("utf-8"))

    def _send(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError as exc:
            raise WireError(f"the store closed the connection: {exc}") from None

    def _recv(self, size: int) -> bytes:
        """``size`` bytes within the socket's timeout for the whole answer (a server that sends a byte at a
        time does not reset it); no timeout (``settimeout(None)``, a watcher's wait) waits until ``close``."""
        timeout = self._sock.gettimeout()
        deadline = None if timeout is None else time.monotonic() + timeout
        chunks, left = [], size
        try:
            while left:
                if deadline is not None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise WireError(f"the store did not answer {size} bytes within {timeout:g} s")
                    self._sock.settimeout(remaining)
                try:
                    chunk = self._sock.recv(min(left, 1 << 20))
                except OSError as exc:  # socket.timeout included
                    raise WireError(f"the store did not answer: {exc}") from None
                if not chunk:
                    raise WireError("the store closed the connection")
                chunks.append(chunk)
                left -= len(chunk)
        finally:
            if deadline is not None:
                try:
                    self._sock.settimeout(timeout)
                except OSError:  # closed meanwhile (``close`` from another thread)
                    pass
        return b"".join(chunks)

    def _recv_value(self) -> bytes:
        (size,) = struct.unpack("<Q", self._recv(8))
        if size > MAX_VALUE:
            raise WireError(f"the store sent a value of {size} bytes (at most {MAX_VALUE})")
        return self._recv(size)

    def settimeout(self, seconds: float | None) -> None:
        self._sock.settimeout(seconds)

    def set(self, key: str, value) -> None:
        data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        self._send(bytes([_SET]) + self._key(key) + _string(data))

    def get(self, key: str) -> bytes:
        """The value; the key must exist (``check`` first): the server would wait for it."""
        self._send(bytes([_GET]) + self._key(key))
        return self._recv_value()

    def add(self, key: str, amount: int) -> int:
        self._send(bytes([_ADD]) + self._key(key) + struct.pack("<q", int(amount)))
        return struct.unpack("<q", self._recv(8))[0]

    def check(self, keys: list[str]) -> bool:
        self._send(bytes([_CHECK]) + struct.pack("<Q", len(keys)) + b"".join(self._key(k) for k in keys))
        answer = self._recv(1)[0]
        if answer not in (0, 1):
            raise WireError(f"the store answered check with {answer}")
        return answer == _READY

    def multi_get(self, keys: list[str]) -> list[bytes]:
        self._send(bytes([_MULTI_GET]) + struct.pack("<Q", len(keys)) + b"".join(self._key(k) for k in keys))
        return [self._recv_value() for _ in keys]

    def wait(self, keys: list[str]) -> None:
        """Until every key is set, or the timeout (``WireError``; the connection is then unusable)."""
        self._send(bytes([_WAIT]) + struct.pack("<Q", len(keys)) + b"".join(self._key(k) for k in keys))
        answer = self._recv(1)[0]
        if answer != _STOP_WAITING:
            raise WireError(f"the store answered wait with {answer}")

    def close(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
