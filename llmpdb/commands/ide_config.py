"""What ``ide`` prints: the address it may listen on, and the IDE attach configurations for that address.

Usage::

    host, port = parse_listen_address("5678")            # ("127.0.0.1", 5678); "" -> ("127.0.0.1", 0)
    lines = attach_instructions("127.0.0.1", 5678, cwd="/srv/job", rank="r1")

``parse_listen_address`` refuses a host other than loopback unless ``public`` is set (the same rule as the
attach socket's ``--listen-public``). ``attach_instructions`` is the VS Code ``launch.json`` entry (JSON,
``"request": "attach"``), one line on PyCharm (it cannot attach to debugpy) and the ``ssh -L`` line to
reach it from another machine. Pure text: nothing here opens a socket.
"""

from __future__ import annotations

import ipaddress
import json
import socket

__all__ = ["parse_listen_address", "is_loopback", "attach_instructions", "LOOPBACK"]

LOOPBACK = "127.0.0.1"
_MAX_HOST = 253


def is_loopback(host: str) -> bool:
    """Usage: ``is_loopback("::1")`` -> True; ``localhost`` and any 127.x address count, names never resolve."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _port(text: str) -> int:
    if not text.isascii() or not text.isdigit() or len(text) > 5 or int(text) > 65535:
        raise ValueError(f"bad port {text[:20]!r}: a whole number from 0 to 65535 (0 picks a free one)")
    return int(text)


def parse_listen_address(text: str, public: bool = False) -> tuple[str, int]:
    """Usage: ``parse_listen_address("127.0.0.1:5678")``; ``[HOST:]PORT`` (``[::1]:5678`` for IPv6) or empty
    (a free loopback port). Raises ``ValueError`` with a one-line reason."""
    text = (text or "").strip()
    if not text:
        return LOOPBACK, 0
    host, sep, port_text = text.rpartition(":")
    if not sep:
        return LOOPBACK, _port(text)
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or len(host) > _MAX_HOST or not host.isascii() or not all(c.isalnum() or c in ".-:_" for c in host):
        raise ValueError(f"bad host {host[:40]!r}: give [HOST:]PORT, e.g. 127.0.0.1:5678")
    port = _port(port_text)
    if not is_loopback(host) and not public:
        raise ValueError(f"{host} is not loopback: other machines could reach the debugger there. Listen on "
                         "127.0.0.1 and tunnel (ssh -L), or pass --listen-public")
    return host, port


def attach_instructions(host: str, port: int, *, cwd: str, rank: str = "") -> list[str]:
    """Usage: ``attach_instructions("127.0.0.1", 5678, cwd=os.getcwd())``; the lines ``ide`` prints."""
    name = f"attach to llmpdb{' ' + rank if rank else ''} ({socket.gethostname()}:{port})"
    config = {
        "name": name,
        "type": "debugpy",
        "request": "attach",
        "connect": {"host": "127.0.0.1" if is_loopback(host) else host, "port": port},
        "justMyCode": False,
        "pathMappings": [{"localRoot": "${workspaceFolder}", "remoteRoot": cwd}],
    }
    lines = ["VS Code (.vscode/launch.json, in \"configurations\"; pathMappings only when your files are elsewhere):"]
    lines += json.dumps(config, indent=2).splitlines()
    lines.append("PyCharm: its debugger speaks pydevd's own protocol, not debugpy's (DAP), so it cannot attach "
                 "here: attach with VS Code, or see docs/remote.md (PyCharm) for PyCharm's Python Debug Server")
    if is_loopback(host):
        lines.append(f"From another machine: ssh -N -L {port}:127.0.0.1:{port} {socket.gethostname()} "
                     f"(then attach to 127.0.0.1:{port} there)")
    return lines
