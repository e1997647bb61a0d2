"""Whether a module runs under ``torch.compile``, told from types and stored attributes only.

Usage::

    compiled_reason(model, "model.layers.1.mlp")   # "OptimizedModule wraps the model (torch.compile)" or None
    dynamo_disabled()                                # True under TORCHDYNAMO_DISABLE=1 (--no-compile)
    compiled_warning("layers.1.mlp", [model])         # the one warning line break-module prints, or None

A module breakpoint stops when the module's Python ``forward`` frame starts; dynamo runs a compiled
forward's transformed code instead (the frame never starts), so the breakpoint never stops. This module
says why a module would run compiled: its root is torch.compile's ``OptimizedModule`` (``_orig_mod``);
``Module.compile()`` was called on it or on a module above it (``_compiled_call_impl`` in the instance
dict); or the ``forward`` of it or of a module above it is a compiled function (``torch.compile``
decorated or assigned: dynamo's wrapper carries ``_torchdynamo_orig_callable``). Only stored attributes
are read (``inspect.getattr_static``): no property, ``__getattr__`` or forward of the user's runs.
"""

from __future__ import annotations

import os
import sys

from .kinds import MISSING, static_attr
from .module_match import match_modules
from .modules import unwrap_model

__all__ = ["compiled_reason", "compiled_warning", "dynamo_disabled", "is_compiled_function", "NO_COMPILE_HINT"]

NO_COMPILE_HINT = "rerun with `python -m llmpdb --no-compile` (sets TORCHDYNAMO_DISABLE=1)"


def dynamo_disabled() -> bool:
    """Usage: ``dynamo_disabled()``; True when dynamo is switched off (compiled code then runs eagerly)."""
    if os.environ.get("TORCHDYNAMO_DISABLE", "") == "1":
        return True
    config = sys.modules.get("torch._dynamo.config")
    try:  # torch's own config module (values behind its __getattr__), not the user's code
        return getattr(config, "disable", False) is True
    except Exception:  # an odd torch: dynamo counts as on, so the warning is given
        return False


def is_compiled_function(func) -> bool:
    """Usage: ``is_compiled_function(torch.compile(f))`` -> True; dynamo's wrapper of a compiled callable."""
    if func is None or func is MISSING:
        return False
    inner = static_attr(func, "__func__", None)  # a bound method: look at the function it binds
    for candidate in (func, inner):
        if candidate is not None and static_attr(candidate, "_torchdynamo_orig_callable") is not MISSING:
            return True
    return False


def _own_reason(module, name: str) -> str | None:
    label = name or f"the root ({type(module).__name__})"
    try:
        own = vars(module)
    except TypeError:  # a module without an instance dict: nothing stored on it
        own = {}
    if own.get("_compiled_call_impl") is not None:
        return f"{label} was compiled with .compile()"
    if is_compiled_function(own.get("forward")):
        return f"the forward of {label} is a torch.compile'd function"
    for klass in type(module).__mro__:
        if "forward" in vars(klass):
            if is_compiled_function(vars(klass)["forward"]):
                return f"{klass.__name__}.forward is decorated with torch.compile"
            break
    return None


def compiled_reason(root, name: str) -> str | None:
    """Usage: ``compiled_reason(root, qualified_name)``; why the module ``name`` under ``root`` would run
    compiled (its own forward or one above it), or None. ``name`` is relative to the model inside the
    wrappers (``model.layers.1.mlp``; ``""`` is the root)."""
    inner, chain = unwrap_model(root)
    for wrapper, kind, _ in chain:
        if kind == "torch.compile":
            return f"the model is wrapped by torch.compile ({type(wrapper).__name__}, _orig_mod)"
        reason = _own_reason(wrapper, "")
        if reason:
            return reason
    try:
        by_name = dict(inner.named_modules())
    except Exception:  # a model whose traversal fails: no module path to look along, nothing to claim
        return None
    parts = name.split(".") if name else []
    for depth in range(len(parts) + 1):
        prefix = ".".join(parts[:depth])
        module = by_name.get(prefix)
        if module is None:
            continue
        reason = _own_reason(module, prefix)
        if reason:
            return reason
    return None


def compiled_warning(pattern: str, roots, aliases=()) -> str | None:
    """Usage: ``compiled_warning("layers.1.mlp", [model])`` -> ``"warning: model.layers.1.mlp runs under
    torch.compile (...): ..."``; None when no module the pattern selects runs compiled, or dynamo is off."""
    if dynamo_disabled():
        return None
    for root in roots:
        for match in match_modules(pattern, [root], aliases):
            reason = compiled_reason(root, match.names[0] if match.names else "")
            if reason:
                return (f"warning: {match.label} runs under torch.compile ({reason}); dynamo does not start "
                        f"its Python forward, so this breakpoint will not stop there; {NO_COMPILE_HINT}")
    return None
