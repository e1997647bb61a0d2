"""Fast line breakpoints: pdb's decisions, delivered without a trace function on every call.

Usage::

    from llmpdb.breakpoints import FastBreakpointsMixin
    class Pdb(FastBreakpointsMixin, pdb.Pdb): ...

``engine`` (modes, ``EngineBase``), ``mixin`` (the ``Pdb`` mixin and the engine choice), ``monitoring``
(3.12+ ``sys.monitoring``), ``hooked`` (3.11 hooks compiled into code objects) with ``bytecode`` and
``patching``, ``guards`` (3.11: the script compiled with a guarded hook on every line), ``trace`` (the lean trace
function, the fallback of both), ``interrupt`` (Ctrl-C that always stops).
"""

from .engine import CONTINUE, OFF, STOCK, WATCH
from .interrupt import SafeInterruptMixin
from .mixin import FastBreakpointsMixin, engine_kind

__all__ = ["FastBreakpointsMixin", "SafeInterruptMixin", "engine_kind", "STOCK", "CONTINUE", "WATCH", "OFF"]
