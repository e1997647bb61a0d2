"""What a listen or attach address means, checked before any socket is made.

Usage::

    parse_target("tcp:127.0.0.1:5678")   # ("tcp", ("127.0.0.1", 5678))
    parse_target("127.0.0.1:5678")       # the same (debugpy's spelling); "5678" -> ("tcp", ("127.0.0.1", 5678))
    parse_target("")                     # ("unix", None): the job's own socket in the per-user directory
    parse_target("/x/y.sock")            # ("unix", "/x/y.sock"); "unix:PATH" for any other path
    check_listen("tcp:0.0.0.0:5678")     # RemoteError unless LLMPDB_LISTEN_PUBLIC=1 (--listen-public)

Forms: ``unix`` / empty (the default socket), ``tcp``, ``tcp:PORT``, ``tcp:HOST:PORT``, ``HOST:PORT``,
``[IPV6]:PORT`` and a bare ``PORT`` are TCP (host 127.0.0.1, port 0: any free one); ``unix:PATH`` and
anything else (a path) is a Unix socket. A port is 0 to 65535 in ASCII digits; a host is at most 253
characters of letters, digits, ``.-_:%``. Every bad address is a RemoteError with one line, never a file
named after it. A host other than loopback (127.0.0.0/8, ::1, ``localhost``) makes the job reachable
from other machines: ``check_listen`` refuses it unless ``LLMPDB_LISTEN_PUBLIC=1`` is set.
"""

from __future__ import annotations

import ipaddress
import os
import re

__all__ = ["RemoteError", "parse_target", "is_loopback", "public_allowed", "check_listen", "PUBLIC_ENV"]

PUBLIC_ENV = "LLMPDB_LISTEN_PUBLIC"
_PORT = re.compile(r"[0-9]{1,5}")
_HOST = re.compile(r"[A-Za-z0-9._%:-]{1,253}")
_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.%a-z]+\]|[A-Za-z0-9._-]+):([0-9]+)")


class RemoteError(Exception):
    """A listener or connection that cannot be made; the message is one line for the user."""


def _bad(spec: str) -> RemoteError:
    return RemoteError(f"bad TCP address {spec[:80]!r}: expected tcp, tcp:PORT, tcp:HOST:PORT, HOST:PORT or PORT")


def _tcp(spec: str, host: str, port: str) -> tuple[str, tuple[str, int]]:
    host = host.strip("[]") or "127.0.0.1"
    if not _PORT.fullmatch(port) or int(port) > 65535 or not _HOST.fullmatch(host):
        raise _bad(spec)
    return "tcp", (host, int(port))


def parse_target(spec: str) -> tuple[str, object]:
    """Usage: ``parse_target("tcp:127.0.0.1:5678")`` -> ``("tcp", ("127.0.0.1", 5678))``; ``"unix"``, ``""``
    or a path -> ``("unix", path-or-None)``; ``tcp`` / ``tcp:PORT`` / ``PORT`` bind 127.0.0.1."""
    spec = (spec or "").strip()
    if spec in ("", "unix"):
        return "unix", None
    if spec == "tcp" or spec.startswith("tcp:"):
        parts = spec.split(":")[1:]
        if not parts:
            return "tcp", ("127.0.0.1", 0)
        if len(parts) == 1:
            return _tcp(spec, "127.0.0.1", parts[0])
        return _tcp(spec, ":".join(parts[:-1]), parts[-1])
    if spec.startswith("unix:"):
        return "unix", spec[5:] or None
    if _PORT.fullmatch(spec):
        return _tcp(spec, "127.0.0.1", spec)
    match = _HOST_PORT.fullmatch(spec)
    if match:
        return _tcp(spec, match.group(1), match.group(2))
    return "unix", spec


def is_loopback(host: str) -> bool:
    """Usage: ``is_loopback("127.0.0.1")`` -> True; ``"0.0.0.0"``, ``""``, other names -> False."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def public_allowed() -> bool:
    """Usage: ``public_allowed()``; True when ``LLMPDB_LISTEN_PUBLIC`` is 1/true/yes."""
    return os.environ.get(PUBLIC_ENV, "").strip().lower() in ("1", "true", "yes")


def check_listen(spec: str) -> tuple[str, object]:
    """Usage: ``check_listen(os.environ["LLMPDB_LISTEN"])``; ``parse_target`` plus the public opt-in."""
    kind, address = parse_target(spec)
    if kind == "tcp" and not is_loopback(address[0]) and not public_allowed():
        raise RemoteError(f"{address[0]} is not loopback: other machines could reach the job; set "
                          f"{PUBLIC_ENV}=1 (python -m llmpdb --listen-public) to listen there anyway")
    return kind, address
