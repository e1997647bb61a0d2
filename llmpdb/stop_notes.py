"""One-line notes printed when the debugger stops: compiled-code warnings, the model path summary...

Usage::

    from llmpdb.stop_notes import register_stop_note
    register_stop_note(lambda frame, debugger: "eval · no_grad · cache 7")

A provider returns a line, a list of lines or None. A provider that raises prints one line saying so;
it never prevents the stop.
"""

from __future__ import annotations

from typing import Callable

from .inspect.compiled import COMPILE_HINT, compiled_context

__all__ = ["register_stop_note", "stop_notes", "STOP_NOTE_PROVIDERS"]

StopNote = Callable[[object, object], "str | list[str] | None"]
STOP_NOTE_PROVIDERS: list[StopNote] = []


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


@register_stop_note
def compiled_code_note(frame, debugger) -> str | None:
    reason = compiled_context(frame)
    return f"llmpdb: stopped in {reason}: {COMPILE_HINT}" if reason else None


@register_stop_note
def kv_growth_note(frame, debugger) -> None:
    """Record the KV cache in reach (metadata only) so ``kv --history`` covers every stop, typed or not."""
    from .commands.kv import record_kv_history

    record_kv_history(debugger.frame_locals())
    return None
