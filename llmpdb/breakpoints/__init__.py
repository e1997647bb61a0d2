"""Fast line breakpoints: pdb's decisions, delivered without a trace function on every call.

Usage::

    from llmpdb.breakpoints import FastBreakpointsMixin
    class Pdb(FastBreakpointsMixin, pdb.Pdb): ...

``engine`` (modes, ``EngineBase``), ``mixin`` (the ``Pdb`` mixin and the engine choice), ``monitoring``
(3.12+ ``sys.monitoring``), ``hooked`` (3.11 hooks compiled into code objects) with ``bytecode`` and
``patching``, ``guards`` (3.11: the script compiled with a guarded hook on every line), ``trace`` (the lean trace
function, the fallback of both), ``interrupt`` (Ctrl-C that always stops), ``conditions`` (a breakpoint's
condition judged in the engine), ``catching`` (exception breakpoints: ``catch``), ``muting`` (muted
``breakpoint()`` sites: ``mute``).
"""

__all__ = ["FastBreakpointsMixin", "SafeInterruptMixin", "engine_kind", "STOCK", "CONTINUE", "WATCH", "OFF"]

# Loaded on first use: ``import llmpdb`` needs only ``muting`` and ``catching`` from this family, and the
# engine is imported when the debugger class is built.
_NAMES = {"FastBreakpointsMixin": "mixin", "engine_kind": "mixin", "SafeInterruptMixin": "interrupt",
          "STOCK": "engine", "CONTINUE": "engine", "WATCH": "engine", "OFF": "engine"}


def __getattr__(name: str):
    if name in _NAMES:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_NAMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
