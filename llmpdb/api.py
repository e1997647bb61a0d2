"""The Python API: llmpdb's answers in a VS Code / PyCharm debug console, a notebook or a script.

Usage::

    import llmpdb
    llmpdb.shapes()                   # every tensor in the caller's locals, printed; returns the TensorWalk
    llmpdb.shapes(outputs)            # one object (named after the caller's variable that holds it)
    llmpdb.stack_model()              # the caller's stack as modules; returns the [StackEntry]
    llmpdb.kv()                       # the KV cache in the caller's locals; returns the CacheReport
    llmpdb.kv(outputs.past_key_values)
    llmpdb.statediff(model, "ckpt/")  # model vs checkpoint (metadata only); returns the StateDiff
    llmpdb.grads(model)               # gradient norms by layer after backward(); returns the GradReport
    llmpdb.tokens(inputs, tokenizer)  # input_ids decoded, padding; returns the TokenReport
    llmpdb.trace(model, inputs)       # runs model(**inputs) under forward hooks; returns the TraceReport
    llmpdb.mem()                      # where the memory in the caller's frame goes; returns the MemoryReport
    llmpdb.show(attn[0, 2])           # a heatmap: SVG in a notebook, text on a terminal; returns the Picture

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
from collections.abc import Mapping
from typing import Any

from .commands.navigation import render_stop_header, user_root
from .inspect.compiled import compiled_note
from .inspect.config import locate_config
from .inspect.dims import DimNamer
from .inspect.frames import frame_locals
from .inspect.kv import SEARCHED, CacheReport, find_cache, inspect_cache, unwrap_cache
from .inspect.modules import frame_stack, model_stack
from .inspect.root_names import ambiguous_root_names, models_in_sight, tree_root_names
from .inspect.safe import no_torch_function, type_name
from .inspect.statediff import StateDiff
from .inspect.statediff import statediff as _statediff
from .inspect.tensors import TensorWalk, frame_tensors, walk_tensors
from .render.kv import render_cache
from .render.modules import render_model_stack
from .render.statediff import render_statediff
from .render.config_file import config, style_for
from .render.style import Style
from .render.tensors import render_tensors

__all__ = ["shapes", "stack_model", "kv", "statediff", "grads", "tokens", "trace", "mem", "show"]


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



def trace(model: Any, inputs: Any = None, *, pattern: str | None = None, depth: int | None = None,
          fold: bool = True, show: bool = True):
    """Usage: ``llmpdb.trace(model, inputs)``: runs ``model(**inputs)`` (a dict or BatchEncoding; a tuple:
    ``model(*inputs)``; a tensor: ``model(inputs)``; None: ``model()``) under forward hooks and prints the
    ``trace`` table: each module call's path, class, input and output shapes, dtype. ``pattern`` (a name,
    glob or class, as ``break-module`` takes) and ``depth`` select modules; ``fold=False`` lists every layer.
    Returns the ``TraceReport``; the hooks are removed however the call ends (what it raises propagates)."""
    from .forward.trace import ForwardTrace, traced_modules
    from .inspect.kinds import is_module
    from .inspect.module_match import match_modules
    from .inspect.modules import model_names
    from .inspect.trace_records import TraceReport, collapse_calls
    from .render.trace import render_trace

    if not is_module(model):
        raise TypeError(f"llmpdb.trace: a torch module is needed, not a {type(model).__name__}")
    only = None
    if pattern is not None:
        matches = match_modules(pattern, [model])
        if not matches:
            raise ValueError(f"llmpdb.trace: no module matches {pattern!r}")
        only = {id(m.module) for m in matches}

    def names_of(root):
        return {key: (value[0] if value else "") for key, value in model_names(root).names.items()}

    recorder = ForwardTrace(traced_modules([(model, "")], names_of, depth=depth, only=only), [model])
    kind = type(inputs)
    with recorder.recording():
        if inputs is None:
            output = model()
        elif issubclass(kind, Mapping):  # by type: a BatchEncoding is a Mapping, never asked what it is
            output = model(**inputs)
        elif issubclass(kind, (tuple, list)):
            output = model(*inputs)
        else:
            output = model(inputs)
    rows = collapse_calls(recorder.calls, fold=fold)
    if show:
        _show(render_trace(rows, width=_width(), calls=len(recorder.calls), dropped=recorder.dropped,
                           folded=fold, style=_style()))
    return TraceReport(tuple(recorder.calls), tuple(rows), recorder.dropped, output)


def mem(*, top: int = 10, show: bool = True):
    """Usage: ``llmpdb.mem()`` (or ``mem(top=3)``): what ``mem`` prints for the caller's frame: CUDA
    counters (only when this process already initialised CUDA), the largest tensors in its locals (a shared
    storage counted once), and what the models in sight, their gradients, the KV cache in reach and the
    optimizers hold. Metadata only; returns the ``MemoryReport``."""
    from .inspect.memory import (MemoryReport, cache_holdings, cuda_memory, find_optimizers, largest_tensors,
                                 model_holdings, optimizer_holdings)
    from .render.memory import render_memory

    if type(top) is not int or top < 1:
        raise ValueError(f"llmpdb.mem: top must be a whole number ≥ 1, not {top!r}")
    caller = sys._getframe(1)
    try:
        local_vars = frame_locals(caller)
        rows, storages, total, notes = largest_tensors(local_vars, top=top)
        stack = frame_stack(caller)
        holdings = model_holdings(models_in_sight(stack, len(stack) - 1))
        found = find_cache(local_vars)
        holdings += cache_holdings([found] if found is not None else [])
        holdings += optimizer_holdings(find_optimizers(local_vars))
        report = MemoryReport(cuda_memory(), tuple(rows), tuple(holdings), storages, total, tuple(notes))
        if show:
            _show(render_memory(report, width=_width(), style=_style()))
        return report
    finally:
        del caller


def _rich_display() -> bool:
    """True in a front end that shows HTML (a Jupyter kernel): IPython's formatter has text/html active."""
    ipython = sys.modules.get("IPython")
    get = getattr(ipython, "get_ipython", None) if ipython is not None else None
    shell = get() if callable(get) else None
    formatter = getattr(shell, "display_formatter", None)
    return "text/html" in (getattr(formatter, "active_types", None) or ())


def show(x: Any, *, hist: bool = False, bins: int = 10, name: str | None = None, echo: bool | None = None):
    """Usage: ``llmpdb.show(attn_weights[0, 2])`` (``hist=True``: a histogram of any tensor).

    Draws the values as ``show`` does and returns a ``Picture``: in Jupyter the cell's value displays as an
    SVG heatmap (a colour scale with its legend; masked, NaN and +inf cells marked and counted; a tooltip
    per cell), and ``str(picture)`` is the text. On a terminal (``echo=None``: no HTML front end) it prints
    the text rendering, as the command does; ``echo=True``/``False`` forces it. Reads the values, on the
    tensor's device, under ``torch.no_grad``; refuses what cannot be drawn (``ValueError``, one line)."""
    from .commands.show import MAX_ROWS
    from .inspect.heatmap import check_drawable, heat_grid, value_histogram
    from .render.heatmap import render_heatmap, render_histogram
    from .render.picture import Picture

    caller = sys._getframe(1)
    try:
        name = name or _name_in(frame_locals(caller), x, "x")
    finally:
        del caller
    if type(bins) is not int or bins < 1:
        raise ValueError(f"llmpdb.show: bins must be a whole number ≥ 1, not {bins!r}")
    check_drawable(x, name, dims=tuple(range(1, 64)))  # a dense real torch.Tensor (by type) with values
    with no_torch_function():
        dims = tuple(int(s) for s in x.shape)
    if len(dims) == 1:
        hist = True
    elif not hist:
        check_drawable(x, name)  # more than 2-d: the one-line "show a 2-d slice" refusal
    width, style = _width(), _style()
    if hist:
        record = value_histogram(x, bins=bins)
        text = render_histogram(record, name, width=width, style=style)
        picture = Picture(record, name, text)
    else:
        labels = len(str(dims[0] - 1)) * 2 + 1
        text_grid = heat_grid(x, rows=MAX_ROWS, cols=max(8, width - labels - 2))
        text = render_heatmap(text_grid, name, width=width, style=style)
        picture = Picture(heat_grid(x, rows=64, cols=64), name, text)
    if echo if echo is not None else not _rich_display():
        _show(text)
    return picture
