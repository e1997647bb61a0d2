"""llmpdb — a debugger for LLM code in PyTorch: stop at a line, look at the real tensors.

Usage::

    python -m llmpdb infer.py              # like python -m pdb; breakpoint() now opens llmpdb
    import llmpdb; llmpdb.set_trace()
    PYTHONBREAKPOINT=llmpdb.set_trace python train.py
    llmpdb.shapes(); llmpdb.kv(); llmpdb.stack_model()   # in a debug console or notebook
"""

from __future__ import annotations

from .hooks import breakpointhook, install, post_mortem, set_trace, uninstall
from .version import __version__

__all__ = ["Pdb", "set_trace", "post_mortem", "breakpointhook", "install", "uninstall", "shapes", "stack_model",
           "kv", "statediff", "__version__"]

# Public names imported on first use, so ``import llmpdb`` stays cheap until a stop. The API functions
# (llmpdb/api.py) print like the command of the same name and return the record.
_LAZY = {
    "Pdb": ("llmpdb.debugger.core", "Pdb"),
    "shapes": ("llmpdb.api", "shapes"),            # llmpdb.shapes(outputs) -> TensorWalk [TensorInfo]
    "stack_model": ("llmpdb.api", "stack_model"),  # llmpdb.stack_model() -> [StackEntry]
    "kv": ("llmpdb.api", "kv"),                    # llmpdb.kv(cache) -> CacheReport
    "statediff": ("llmpdb.api", "statediff"),      # llmpdb.statediff(model, "ckpt/") -> StateDiff
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'llmpdb' has no attribute {name!r}")
