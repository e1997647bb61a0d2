"""The attach protocol's frames: one kind byte, a 4-byte big-endian length, UTF-8 text.

Usage::

    send_frame(sock, "O", text)                  # any length: an ``O`` over MAX_FRAME goes as several frames
    recv_frame(sock, deadline=time.time() + 10)  # ("L", "p x") or None (closed, timed out, over the limit)

Bounds: a frame holds at most ``MAX_FRAME`` bytes (1 MiB); a longer output text is cut into pieces of at
most ``MAX_FRAME`` bytes at character boundaries (the client prints them one after the other); a longer
frame of another kind is cut. A receiver refuses a frame over its limit (the hello's is ``HELLO_LIMIT``)
before reading its body. ``deadline`` (``time.time()``) bounds a whole frame, not each ``recv``: a peer
that drips one byte at a time cannot hold the reader past it.
"""

from __future__ import annotations

import socket
import struct
import time

from .address import RemoteError

__all__ = ["send_frame", "recv_frame", "split_text", "MAX_FRAME", "HELLO_LIMIT"]

MAX_FRAME = 1 << 20           # bytes in one frame, either way
HELLO_LIMIT = 1 << 16         # bytes in the hello frame of a peer not yet authenticated
_HEADER = struct.Struct(">cI")
_SPLIT = ("O",)               # kinds whose text may arrive in pieces (the others are one message each)


def split_text(text: str, limit: int = MAX_FRAME) -> list[str]:
    """Usage: ``split_text(text)``; pieces whose UTF-8 encodings are at most ``limit`` bytes each."""
    pieces, step = [], max(1, limit // 4)  # a character is at most 4 bytes in UTF-8
    for start in range(0, len(text), step):
        pieces.append(text[start:start + step])
    return pieces or [""]


def _pack(kind: str, data: bytes) -> bytes:
    return _HEADER.pack(kind.encode("ascii", "replace")[:1] or b"?", len(data)) + data


def send_frame(sock: socket.socket, kind: str, text: str) -> None:
    """Send ``text`` as one frame of ``kind`` (several for a long ``O``); OSError when the peer is gone."""
    flags = getattr(socket, "MSG_NOSIGNAL", 0)
    if len(text) > MAX_FRAME // 4 and kind in _SPLIT:
        for piece in split_text(text):
            sock.sendall(_pack(kind, piece.encode("utf-8", "replace")), flags)
        return
    data = text.encode("utf-8", "replace")
    if len(data) > MAX_FRAME:
        data = data[:MAX_FRAME].decode("utf-8", "ignore").encode("utf-8")
    sock.sendall(_pack(kind, data), flags)


def _recv_exact(sock: socket.socket, size: int, deadline: float | None) -> bytes | None:
    chunks, left = [], size
    while left:
        if deadline is not None:
            remaining = deadline - time.time()
            if remaining <= 0:
                return None
            sock.settimeout(remaining)
        chunk = sock.recv(min(left, 65536))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def recv_frame(sock: socket.socket, limit: int = MAX_FRAME, deadline: float | None = None) -> tuple[str, str] | None:
    """``(kind, text)``, or None when the peer closed or the deadline passed; RemoteError for a frame over
    ``limit``, OSError from the socket (its own timeout when no deadline is given)."""
    header = _recv_exact(sock, _HEADER.size, deadline)
    if header is None:
        return None
    kind, size = _HEADER.unpack(header)
    if size > limit:
        raise RemoteError(f"frame of {size} bytes is over the limit of {limit}")
    body = _recv_exact(sock, size, deadline)
    if body is None:
        return None
    return kind.decode("ascii", "replace"), body.decode("utf-8", "replace")
