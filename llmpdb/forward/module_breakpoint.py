"""One module breakpoint's record, and the guard on the engine's entry points that torch calls.

Usage::

    bp = ModuleBreakpoint(1, "model.layers.1.self_attn", condition="hidden_states.shape[1] > 1")
    bp.pending                      # armed on no module yet
    class Engine: _pre_hook = guarded(_pre_hook)   # reports a failure (``self._report``), never raises
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

__all__ = ["ModuleBreakpoint", "guarded"]


@dataclass
class ModuleBreakpoint:
    """A break-module breakpoint; ``calls`` counts entered forwards, ``hits`` those where CONDITION held."""

    number: int
    pattern: str
    condition: str | None = None
    after: int = 0
    once: bool = False
    calls: int = 0
    hits: int = 0
    stops: int = 0
    labels: dict[int, str] = field(default_factory=dict)   # id(module) -> name shown at a stop
    code: object = field(default=None, repr=False)
    roots: list = field(default_factory=list, repr=False)  # weak references to the roots
    aliases: tuple[str, ...] = ()
    root_names: dict[int, str] = field(default_factory=dict)  # id(root) -> variable, when names collide
    near: tuple[str, ...] = ()         # closest names in the models in sight when it was set pending

    @property
    def module_count(self) -> int:
        return len(self.labels)

    @property
    def pending(self) -> bool:
        """Armed on no module yet: waits for a matching module to be created or a new model to run."""
        return not self.labels


def guarded(method):
    """Run-time entry points (torch calls them inside the user's model): report failures, never raise."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:
            self._report(method.__name__.strip("_").replace("_", " "), exc)
            return None

    return wrapper
