"""llmpdb — a debugger for LLM code in PyTorch: stop at a line, look at the real tensors.

Usage::

    python -m llmpdb infer.py              # like python -m pdb; breakpoint() now opens llmpdb
    import llmpdb; llmpdb.set_trace()
    PYTHONBREAKPOINT=llmpdb.set_trace python train.py
"""

from __future__ import annotations

from .hooks import breakpointhook, install, post_mortem, set_trace, uninstall

__version__ = "0.1.0"

__all__ = ["Pdb", "set_trace", "post_mortem", "breakpointhook", "install", "uninstall", "shapes", "kv",
           "statediff", "__version__"]

# Public names imported on first use, so ``import llmpdb`` stays cheap until a stop.
_LAZY = {
    "Pdb": ("llmpdb.debugger", "Pdb"),
    "shapes": ("llmpdb.inspect.tensors", "shapes"),       # llmpdb.shapes(outputs) -> [TensorInfo]
    "kv": ("llmpdb.inspect.kv", "inspect_cache"),         # llmpdb.kv(cache) -> CacheReport
    "statediff": ("llmpdb.inspect.statediff", "statediff"),  # llmpdb.statediff(model, "ckpt/") -> StateDiff
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'llmpdb' has no attribute {name!r}")
