"""llmpdb — a debugger for LLM code in PyTorch: stop at a line, look at the real tensors.

Usage::

    python -m llmpdb infer.py              # like python -m pdb; breakpoint() now opens llmpdb
    import llmpdb; llmpdb.set_trace()
    PYTHONBREAKPOINT=llmpdb.set_trace python train.py
    llmpdb.shapes(); llmpdb.kv(); llmpdb.stack_model()   # in a debug console or notebook
    llmpdb.pm()                            # like pdb.pm(): the last uncaught exception (IPython's last cell)
    %load_ext llmpdb                       # IPython/Jupyter: %debug and %pdb on open llmpdb
    pytest --llmpdb                        # pytest: --pdb --pdbcls=llmpdb:Pdb (the pytest11 plugin)
"""

from __future__ import annotations

from .hooks import breakpointhook, install, pm, post_mortem, set_trace, uninstall
from .version import __version__

__all__ = ["Pdb", "set_trace", "post_mortem", "pm", "breakpointhook", "install", "uninstall", "shapes", "stack_model",
           "kv", "statediff", "grads", "tokens", "trace", "mem", "show", "load_ipython_extension", "unload_ipython_extension", "__version__"]

# Public names imported on first use, so ``import llmpdb`` stays cheap until a stop. The API functions
# (llmpdb/api.py) print like the command of the same name and return the record.
_LAZY = {
    "Pdb": ("llmpdb.debugger.core", "Pdb"),
    "shapes": ("llmpdb.api", "shapes"),            # llmpdb.shapes(outputs) -> TensorWalk [TensorInfo]
    "stack_model": ("llmpdb.api", "stack_model"),  # llmpdb.stack_model() -> [StackEntry]
    "kv": ("llmpdb.api", "kv"),                    # llmpdb.kv(cache) -> CacheReport
    "statediff": ("llmpdb.api", "statediff"),      # llmpdb.statediff(model, "ckpt/") -> StateDiff
    "grads": ("llmpdb.api", "grads"),              # llmpdb.grads(model) -> GradReport
    "tokens": ("llmpdb.api", "tokens"),            # llmpdb.tokens(inputs, tokenizer) -> TokenReport
    "trace": ("llmpdb.api", "trace"),              # llmpdb.trace(model, inputs) -> TraceReport
    "mem": ("llmpdb.api", "mem"),                  # llmpdb.mem() -> MemoryReport
    "show": ("llmpdb.api", "show"),                # llmpdb.show(x) -> Picture (SVG in a notebook)
    "load_ipython_extension": ("llmpdb.hosts.ipython", "load_ipython_extension"),      # %load_ext llmpdb
    "unload_ipython_extension": ("llmpdb.hosts.ipython", "unload_ipython_extension"),  # %unload_ext llmpdb
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'llmpdb' has no attribute {name!r}")
