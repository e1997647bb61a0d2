"""A minimal Debug Adapter Protocol client for tests: Content-Length framed JSON over a loopback socket.

Usage::

    with DapClient("127.0.0.1", port, timeout=10) as dap:
        dap.request("initialize", {"adapterID": "llmpdb-test"})
        dap.request("attach", {...}, wait=False)
        dap.wait_event("initialized"); dap.request("configurationDone")
        stopped = dap.wait_event("stopped")

Every read has a deadline; anything unexpected raises (``TimeoutError``, ``ConnectionError``).
"""

from __future__ import annotations

import json
import socket
import time

__all__ = ["DapClient"]

_MAX_BODY = 16 * 1024 * 1024


class DapClient:
    def __init__(self, host: str, port: int, *, timeout: float = 10.0):
        self.timeout = timeout
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buffer = b""
        self.seq = 0
        self.events: list[dict] = []
        self.responses: dict[int, dict] = {}

    def __enter__(self) -> "DapClient":
        return self

    def __exit__(self, *exc) -> None:
        self.sock.close()

    def send(self, command: str, arguments: dict | None = None) -> int:
        self.seq += 1
        body = json.dumps({"seq": self.seq, "type": "request", "command": command,
                           "arguments": arguments or {}}).encode()
        self.sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        return self.seq

    def _read_message(self, deadline: float) -> dict:
        while b"\r\n\r\n" not in self.buffer:
            self._fill(deadline)
        head, _, rest = self.buffer.partition(b"\r\n\r\n")
        length = None
        for line in head.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        if length is None or length > _MAX_BODY:
            raise ConnectionError(f"bad DAP header {head[:200]!r}")
        self.buffer = rest
        while len(self.buffer) < length:
            self._fill(deadline)
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return json.loads(body)

    def _fill(self, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no DAP message in time")
        self.sock.settimeout(left)
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the debug adapter closed the connection")
        self.buffer += chunk

    def _pump(self, deadline: float) -> None:
        message = self._read_message(deadline)
        if message.get("type") == "event":
            self.events.append(message)
        elif message.get("type") == "response":
            self.responses[message["request_seq"]] = message

    def response(self, seq: int, timeout: float | None = None) -> dict:
        deadline = time.monotonic() + (timeout or self.timeout)
        while seq not in self.responses:
            self._pump(deadline)
        return self.responses.pop(seq)

    def request(self, command: str, arguments: dict | None = None, timeout: float | None = None) -> dict:
        """Send a request and return its response's ``body``; a failed response raises AssertionError."""
        reply = self.response(self.send(command, arguments), timeout)
        assert reply.get("success"), f"{command} failed: {reply.get('message')}"
        return reply.get("body") or {}

    def wait_event(self, name: str, timeout: float | None = None) -> dict:
        """The first event called ``name`` not taken yet (earlier events of other names stay in ``events``)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            for i, event in enumerate(self.events):
                if event.get("event") == name:
                    return self.events.pop(i).get("body") or {}
            self._pump(deadline)
