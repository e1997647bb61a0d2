"""State that outlives one stop: the stop counter, per-command memories, stop notes and the stopper.

Usage::

    from llmpdb.session import SESSION, register_stop_note
    SESSION.memory("kv-history", list).append(...)
    register_stop_note(lambda frame, debugger: "eval · no_grad · cache 7")   # printed at every stop
    SESSION.open_debugger(frame, "module breakpoint 1: ...")                # what a forward hook calls

``set_trace`` may build a new ``Pdb`` at every ``breakpoint()``, so state that must survive between stops
(``kv --history``, ``statediff snap``) lives here, one per process, never on the debugger instance.

Stop notes: a provider returns a line, a list of lines or None; each command family registers its own
(so this module imports none of them). A provider that raises gives one line saying so; it never
prevents the stop. ``SESSION.stopper`` opens the debugger at a frame; ``llmpdb.hooks`` installs it, so
lower layers (forward hooks) can stop without importing the debugger.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["Session", "SESSION", "register_stop_note", "stop_notes", "STOP_NOTE_PROVIDERS"]

StopNote = Callable[[object, object], "str | list[str] | None"]
STOP_NOTE_PROVIDERS: list[StopNote] = []


class Session:
    """Per-process debugging session: ``stop`` counts the interactions so far (1 at the first stop)."""

    def __init__(self) -> None:
        self.stop = 0
        self._memories: dict[str, Any] = {}
        self.stopper: Callable[[object, str], None] | None = None
        self.relay: Callable[[str], None] | None = None  # a job's relay of a log line others cannot see (ranks)
        self.stood_down = ""  # the debugger llmpdb handed the process to (`ide`: "debugpy"); then it never stops

    def memory(self, key: str, factory: Callable[[], Any]) -> Any:
        """Usage: ``SESSION.memory("snapshots", dict)``; created on first use, kept for the process."""
        if key not in self._memories:
            self._memories[key] = factory()
        return self._memories[key]

    def open_debugger(self, frame, header: str) -> None:
        """Usage: ``SESSION.open_debugger(frame, header)``; stop in ``frame`` with the process's debugger."""
        if self.stopper is None:
            raise RuntimeError("no debugger installed (import llmpdb first)")
        self.stopper(frame, header)

    def relay_line(self, line: str) -> None:
        """Usage: ``SESSION.relay_line(log_line)`` after writing it to standard error; in a distributed job
        whose launcher discards this rank's stderr, the visible ranks print it (``llmpdb.ranks`` sets
        ``relay``). Never raises."""
        relay = self.relay
        if relay is not None:
            try:
                relay(line)
            except Exception:  # the line stays where it was written
                pass

    def reset(self) -> None:
        """Forget everything but the stopper (tests)."""
        self.stop = 0
        self.stood_down = ""
        self._memories.clear()


SESSION = Session()


def register_stop_note(provider: StopNote) -> StopNote:
    """Usage: ``register_stop_note(fn)`` (also works as a decorator); idempotent."""
    if provider not in STOP_NOTE_PROVIDERS:
        STOP_NOTE_PROVIDERS.append(provider)
    return provider


def stop_notes(frame, debugger) -> list[str]:
    """Collect the notes for a stop at ``frame``; never raises."""
    lines: list[str] = []
    for provider in STOP_NOTE_PROVIDERS:
        try:
            note = provider(frame, debugger)
        except Exception as exc:
            name = getattr(provider, "__name__", "note")
            lines.append(f"llmpdb: {name} failed: {type(exc).__name__}: {exc}")
            continue
        if isinstance(note, str):
            lines.append(note)
        elif note:
            lines.extend(note)
    return lines
