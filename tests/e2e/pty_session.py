"""Drive a debugger in a real pseudo-terminal, as a user types.

Usage::

    with PtySession(["-m", "llmpdb", "examples/infer.py"]) as s:
        s.wait_prompt()
        out = s.run("shapes")        # the text printed between the command and the next prompt
        s.finish("c")                 # continue to the end; returns the remaining output

ANSI sequences (colours, the line editor's cursor moves) are removed from what is returned.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile

import pexpect

__all__ = ["PtySession", "ROOT", "clean"]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_ESCAPES = re.compile(r"\x1b(\[[0-9;?]*[A-Za-z@]|[=>]|\][^\x07]*\x07)")
PROMPT = re.compile(r"\(llmpdb(?: r\d+)?\) ")


def clean(text: str) -> str:
    """Usage: ``clean(child.before)``; drops escape sequences and carriage returns."""
    return _ESCAPES.sub("", text).replace("\r", "")


class PtySession:
    def __init__(self, args: list[str], *, env: dict | None = None, timeout: float = 90, width: int = 120,
                 executable: str = sys.executable):
        self._state = tempfile.TemporaryDirectory(prefix="llmpdb-state-")  # the prompt's history, not ~'s
        full_env = {**os.environ, "NO_COLOR": "1", "COLUMNS": str(width), "TERM": "xterm",
                    "XDG_STATE_HOME": self._state.name,
                    "LLMPDB_PROGRESS_DELAY": "600",  # no progress bar in transcripts, however slow the machine
                    **(env or {})}
        for key in [k for k, v in full_env.items() if v is None]:
            del full_env[key]
        self.child = pexpect.spawn(executable, args, cwd=ROOT, env=full_env, encoding="utf-8",
                                   timeout=timeout, dimensions=(50, width))
        self.transcript: list[str] = []

    def __enter__(self) -> "PtySession":
        return self

    def __exit__(self, *exc) -> None:
        if self.child.isalive():
            self.child.terminate(force=True)
        self._state.cleanup()

    def wait_prompt(self) -> str:
        self.child.expect(PROMPT)
        text = clean(self.child.before)
        self.transcript.append(text)
        return text

    def run(self, command: str) -> str:
        self.child.sendline(command)
        text = self.wait_prompt()
        # drop the echoed command line: everything up to the first newline
        return text.split("\n", 1)[1] if "\n" in text else ""

    def finish(self, command: str = "c") -> str:
        self.child.sendline(command)
        self.child.expect(pexpect.EOF)
        text = clean(self.child.before)
        self.transcript.append(text)
        self.child.close()
        return text

    @property
    def exitstatus(self) -> int | None:
        return self.child.exitstatus
