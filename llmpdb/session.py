"""State that outlives one stop: the stop counter and per-command memories.

Usage: ``from llmpdb.session import SESSION``; ``SESSION.memory("kv-history", list).append(...)``.
``set_trace`` may build a new ``Pdb`` at every ``breakpoint()``, so state that must survive between stops
(``kv --history``, ``statediff snap``) lives here, one per process, never on the debugger instance.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["Session", "SESSION"]


@dataclass
class Session:
    """Per-process debugging session: ``stop`` counts the interactions so far (1 at the first stop)."""

    stop: int = 0
    _memories: dict[str, Any] = field(default_factory=dict)

    def memory(self, key: str, factory: Callable[[], Any]) -> Any:
        """Usage: ``SESSION.memory("snapshots", dict)``; created on first use, kept for the process."""
        if key not in self._memories:
            self._memories[key] = factory()
        return self._memories[key]

    def reset(self) -> None:
        """Forget everything (tests)."""
        self.stop = 0
        self._memories.clear()


SESSION = Session()
