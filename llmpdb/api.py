"""The Python API: llmpdb's answers in a VS Code / PyCharm debug console, a notebook or a script.

Usage::

    import llmpdb
    llmpdb.shapes()                   # every tensor in the caller's locals, printed; returns the TensorWalk
    llmpdb.shapes(outputs)            # one object (named after the caller's variable that holds it)
    llmpdb.stack_model()              # the caller's stack as modules; returns the [StackEntry]
    llmpdb.kv()                       # the KV cache in the caller's locals; returns the CacheReport
    llmpdb.kv(outputs.past_key_values)
    llmpdb.statediff(model, "ckpt/")  # model vs checkpoint (metadata only); returns the StateDiff

Each function prints what the command of the same name prints at the prompt (same tables, same width
rules: ``COLUMNS`` or the terminal, else 100; colour only on a colour terminal) to ``sys.stdout``, and
returns the record; ``show=False`` only returns it. With no argument they look at the caller's frame.
Bad input raises (``ValueError`` with the command's one-line message, ``CheckpointError`` for checkpoints):
a console shows the message, a script can catch it.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any

from .commands.navigation import render_stop_header, user_root
from .inspect.compiled import compiled_note
from .inspect.config import locate_config
from .inspect.dims import DimNamer
from .inspect.frames import frame_locals
from .inspect.kv import SEARCHED, CacheReport, find_cache, inspect_cache, unwrap_cache
from .inspect.modules import frame_stack, model_stack
from .inspect.root_names import ambiguous_root_names, models_in_sight, tree_root_names
from .inspect.safe import type_name
from .inspect.statediff import StateDiff
from .inspect.statediff import statediff as _statediff
from .inspect.tensors import TensorWalk, frame_tensors, walk_tensors
from .render.kv import render_cache
from .render.modules import render_model_stack
from .render.statediff import render_statediff
from .render.config_file import config, style_for
from .render.style import Style
from .render.tensors import render_tensors

__all__ = ["shapes", "stack_model", "kv", "statediff", "grads", "tokens"]


def _width() -> int:
    if config().width:
        return config().width
    if os.environ.get("COLUMNS", "").isdigit():
        return max(40, int(os.environ["COLUMNS"]))
    return max(40, shutil.get_terminal_size((100, 24)).columns)


def _style() -> Style:
    return style_for(sys.stdout)


def _show(text: str | None) -> None:
    if text:
        print(text, file=sys.stdout, flush=True)


def _name_in(local_vars: dict, obj: Any, default: str) -> str:
    """The caller's variable holding ``obj`` (identity), else ``default``."""
    for key, value in local_vars.items():
        if value is obj and isinstance(key, str) and key.isidentifier() and not key.startswith("__"):
            return key
    return default


def shapes(obj: Any = None, *, stats: bool = False, name: str | None = None, show: bool = True) -> TensorWalk:
    """Usage: ``llmpdb.shapes()`` (the caller's locals) or ``llmpdb.shapes(outputs, stats=True)``.

    Prints the ``shapes`` table and returns the ``TensorWalk`` (a list of ``TensorInfo``). ``name`` is the
    path prefix of ``obj`` (default: the caller's variable that holds it, else ``obj``)."""
    caller = sys._getframe(1)
    try:
        local_vars = frame_locals(caller)
        if obj is None:
            walk, where = frame_tensors(local_vars, stats=stats), "the caller's locals"
        else:
            name = name or _name_in(local_vars, obj, "obj")
            walk, where = walk_tensors(obj, name, stats=stats), f"{name} ({type_name(obj)})"
        if show:
            style = _style()
            note = compiled_note(caller)
            if note:
                _show(style.warn(note))
            namer = DimNamer.from_frame(local_vars) if walk else None
            _show(render_tensors(walk, width=_width(), style=style, namer=namer, stats=stats,
                                 empty=f"no tensors in {where}"))
        return walk
    finally:
        del caller


def stack_model(*, show_all: bool = False, show: bool = True) -> list:
    """Usage: ``llmpdb.stack_model()``; prints the caller's stack as modules (the ``stack-model`` table,
    path line first) and returns its ``StackEntry`` list, outermost first, the caller last."""
    caller = sys._getframe(1)
    try:
        stack = frame_stack(caller)
        index = len(stack) - 1
        entries = model_stack(stack, user_root())
        if show:
            style = _style()
            _show(render_stop_header(caller, style, _width()))
            names = ambiguous_root_names(models_in_sight(stack, index))
            _show(render_model_stack(entries, current=index, show_all=show_all, width=_width(), style=style,
                                     root_names=tree_root_names(entries, names) if names else {}))
        return entries
    finally:
        del caller


def kv(cache: Any = None, *, config: Any = None, show: bool = True) -> CacheReport:
    """Usage: ``llmpdb.kv()`` (the cache in the caller's locals) or ``llmpdb.kv(outputs)``.

    Prints the ``kv`` summary and per-layer table and returns the ``CacheReport``. ``config`` (default: the
    model config in reach of the caller) gives the query heads for the GQA group size. Raises
    ``ValueError`` when there is no cache (or ``cache`` is not one)."""
    caller = sys._getframe(1)
    try:
        local_vars = frame_locals(caller)
        if cache is None:
            found = find_cache(local_vars)
            if found is None:
                raise ValueError(f"no KV cache in the caller's frame (looked at {SEARCHED})")
        else:
            name = _name_in(local_vars, cache, "cache")
            unwrapped = unwrap_cache(cache)
            if unwrapped is None:
                raise ValueError(f"{name} is a {type_name(cache)}, not a KV cache "
                                 "(no .layers, .key_cache/.value_cache, (k, v) tuples, .cache or .past_key_values)")
            found = (name + unwrapped[0], unwrapped[1])
        if config is None:
            located = locate_config(local_vars)
            config = located[0] if located else None
        path, found_cache = found
        report = inspect_cache(found_cache, config=config)
        if show:
            _show(render_cache(report, width=_width(), style=_style(), path=path))
        return report
    finally:
        del caller


def statediff(model: Any, other: Any, *, unsafe_trusted: bool = False, full: bool = False,
              model_label: str | None = None, other_label: str | None = None, show: bool = True) -> StateDiff:
    """Usage: ``llmpdb.statediff(model, "ckpt/")`` or ``llmpdb.statediff(model, other_model)``.

    Prints the ``statediff`` report (``full=True``: every tensor, as ``--all``) and returns the
    ``StateDiff``. ``other``: a checkpoint path (reads metadata only; a pickle that needs arbitrary code
    is refused unless ``unsafe_trusted=True``), a module or a state dict. Raises ``CheckpointError``."""
    caller = sys._getframe(1)
    try:
        local_vars = frame_locals(caller)
        if model_label is None:
            model_label = _name_in(local_vars, model, "model")
        if other_label is None and not isinstance(other, (str, os.PathLike)):
            other_label = _name_in(local_vars, other, "other")
        diff = _statediff(model, other, unsafe_trusted=unsafe_trusted, model_label=model_label,
                          other_label=other_label)
        if show:
            _show(render_statediff(diff, width=_width(), full=full, style=_style()))
        return diff
    finally:
        del caller


def grads(model: Any, pattern: str | None = None, *, show: bool = True):
    """Usage: ``llmpdb.grads(model)`` after ``loss.backward()`` (or ``grads(model, "layers.0")``): what
    ``grads`` prints, per parameter grouped by layer: the gradient's norm, ``None`` grads, frozen parameters,
    NaN/Inf; returns the ``GradReport``. Reads gradient values (one norm each), never parameter values."""
    from .inspect.grads import grad_report
    from .inspect.kinds import is_module
    from .render.grads import render_grads

    if not is_module(model):
        raise TypeError(f"llmpdb.grads: a torch module is needed, not a {type(model).__name__}")
    report = grad_report(model, pattern)
    if show:
        _show(render_grads(report, width=_width(), style=_style()))
    return report


def tokens(inputs: Any = None, tokenizer: Any = None, *, row: int | None = None, show: bool = True):
    """Usage: ``llmpdb.tokens(inputs, tokenizer)`` (or ``llmpdb.tokens()``: the caller's ``input_ids`` and
    tokenizer, found by type): ``input_ids`` decoded token by token, padding and its side, special tokens,
    truncation, as ``tokens`` prints it; returns the ``TokenReport``."""
    from .inspect.tokens import find_inputs, find_tokenizers, is_tokenizer, split_inputs, token_report
    from .render.tokens import render_tokens

    caller = sys._getframe(1)
    local_vars = frame_locals(caller)
    if inputs is None:
        found = find_inputs(local_vars)
        if found is None:
            raise ValueError("llmpdb.tokens: no input_ids in the caller's frame; pass them: tokens(inputs)")
        inputs = found[1]
    if tokenizer is None:
        candidates = find_tokenizers(local_vars, caller.f_globals)
        if len(candidates) > 1:
            names = ", ".join(name for name, _ in candidates)
            raise ValueError(f"llmpdb.tokens: several tokenizers ({names}): pass one: tokens(inputs, tok)")
        tokenizer = candidates[0][1] if candidates else None
    elif not is_tokenizer(tokenizer):
        raise TypeError(f"llmpdb.tokens: {type(tokenizer).__name__} is not a transformers tokenizer")
    ids, mask = split_inputs(inputs)
    rows = [row] if row is not None else list(range(min(len(ids), 8)))
    report = token_report(tokenizer, ids, mask, rows=rows)
    if show:
        _show(render_tokens(report, width=_width(), style=_style()))
    return report

