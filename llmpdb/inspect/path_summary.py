"""Which path the code took: train or eval, grad mode, autocast, labels, KV cache, attention kernel, compile.

Usage::

    summary = path_summary(stack, index, root=None)   # pdb's stack and current index
    summary.training, summary.grad, summary.cache_length, summary.attn_implementation

Looks at the module frames of the stack (``llmpdb.inspect.modules``): the innermost one at or above
``index`` is "the module you are in". ``labels`` and the cache come from the locals of the module frames,
innermost first (a cache is a local named ``cache``, ``past_key_values``, ``past_key_value``,
``layer_past``, ``past`` or ``kv_cache`` that ``kv.looks_like_cache`` takes for one, or None). Grad and
autocast state are the thread's current state, read through ``torch`` only when the program imported it;
unknown (``finished``) when the frame already ended (a traceback's frame: post-mortem, a crash report).
Nothing here reads tensor data: a cache length comes from ``get_seq_length()`` when it returns a plain int,
else from a key tensor's shape. No user code runs:
modules are read through their dicts (``kinds.module_attr``), and ``get_seq_length`` is called only when
transformers defines it (a user's object named ``cache`` is never asked anything).
"""

from __future__ import annotations

import os
import sys
import weakref
from dataclasses import dataclass
from typing import Any

from .frames import frame_locals
from .compiled import compiled_context
from .kinds import library_attr, library_method, module_attr, sequence_iter, static_attr
from .kv import is_kv_pair, looks_like_cache
from .modules import ModuleFrame, is_module, model_stack, unwrap_model
from .safe import is_tensor

__all__ = ["PathSummary", "path_summary", "CACHE_NAMES", "cache_length"]

CACHE_NAMES = ("cache", "past_key_values", "past_key_value", "layer_past", "past", "kv_cache")
_ABSENT = object()
_AUTOCAST_DEVICES = ("cpu", "cuda", "xpu", "mps", "hpu")
_GENERATION_DIR = os.sep + os.path.join("transformers", "generation") + os.sep


@dataclass(frozen=True)
class PathSummary:
    """What the header line says; a field is None when it cannot be told at this stop."""

    module: ModuleFrame | None = None     # the innermost module frame at or above the current frame
    model_class: str | None = None        # the root's class when no module frame is on the stack
    training: bool | None = None
    grad: bool | None = None
    inference_mode: bool = False
    autocast: tuple[tuple[str, str], ...] = ()   # (device type, dtype)
    labels: bool | None = None            # None: no frame takes labels
    cache: str | None = None              # class name of the cache; "" when a cache argument is None
    cache_length: int | None = None
    attn_implementation: str | None = None
    compiled: str | None = None           # why the frame looks compiled, or None
    generating: bool = False              # generate() is on the stack
    finished: bool = False                # the frame ended (a traceback's, post-mortem): grad/autocast unknown



def _first_key_tensor(value, depth: int = 0):
    if is_tensor(value):
        return value if value.dim() >= 3 else None
    items = sequence_iter(value) if depth < 3 else None
    first = next(items, None) if items is not None else None
    return None if first is None else _first_key_tensor(first, depth + 1)


def cache_length(cache) -> int | None:
    """Usage: ``cache_length(past_key_values)``; tokens held, or None when it cannot be told without data.

    A transformers ``Cache`` answers through ``get_seq_length()`` (kept only when it is a plain int: a
    tensor would need a read); a tuple cache through its first key's ``shape[-2]`` (batch, heads, seq, dim).
    Any other object is not asked (its ``get_seq_length`` would be user code).
    """
    get_len = library_method(cache, "get_seq_length")
    if get_len is not None:
        try:
            value = get_len()
        except Exception:  # an empty or exotic cache that refuses: say nothing rather than guess
            return None
        return value if type(value) is int else None
    key = _first_key_tensor(cache)
    if key is not None:
        return int(key.shape[-2])
    return None


def _locals(frame) -> dict:
    return frame_locals(frame)


def _running(frame) -> bool:
    """True when ``frame`` still runs in some thread; False for a traceback's frame after the exception left
    it (post-mortem, a crash report), whose grad and autocast state the thread's state no longer tells."""
    for top in sys._current_frames().values():
        while top is not None:
            if top is frame:
                return True
            top = top.f_back
    return False


def _grad_state() -> tuple[bool | None, bool]:
    torch = sys.modules.get("torch")
    if torch is None:
        return None, False
    try:
        return bool(torch.is_grad_enabled()), bool(torch.is_inference_mode_enabled())
    except Exception:  # a stripped torch build
        return None, False


def _autocast_state() -> tuple[tuple[str, str], ...]:
    torch = sys.modules.get("torch")
    if torch is None:
        return ()
    found = []
    for device in _AUTOCAST_DEVICES:
        try:
            if torch.is_autocast_enabled(device):
                dtype = str(torch.get_autocast_dtype(device)).replace("torch.", "")
                found.append((device, dtype))
        except Exception:  # an older torch (no device argument) or a device type it does not know
            continue
    return tuple(found)


_ATTENTION_WORDS = ("attention", "attn")
_WALK_LIMIT = 20000  # modules looked at for an attention layer; beyond it, the answer is "may have one"
_HAS_ATTENTION: dict[int, tuple[Any, bool]] = {}  # id(model) -> (weak reference, verdict): a few per process


def _has_attention(model) -> bool:
    """Whether a module or any module under it is an attention layer (by class name: ``LlamaAttention``,
    ``GPT2Attention``, ``MultiheadAttention``, ``JambaAttention``...). A Mamba model has none, and its config
    still carries transformers' default ``_attn_implementation``. Read through ``_modules`` dicts only."""
    cached = _HAS_ATTENTION.get(id(model))
    if cached is not None and cached[0]() is model:
        return cached[1]
    todo, seen, verdict = [model], 0, False
    while todo and not verdict:
        module = todo.pop()
        seen += 1
        if seen > _WALK_LIMIT:
            verdict = True
            break
        name = type(module).__name__.lower()
        verdict = any(word in name for word in _ATTENTION_WORDS)
        children = static_attr(module, "_modules", None)
        if type(children) is dict:
            todo.extend(child for child in children.values() if is_module(child))
    if len(_HAS_ATTENTION) > 16:
        _HAS_ATTENTION.clear()
    try:
        _HAS_ATTENTION[id(model)] = (weakref.ref(model), verdict)  # never keeps a model alive
    except TypeError:  # not weakly referenceable: asked again next time
        pass
    return verdict


def _attn_implementation(*modules) -> str | None:
    """The attention kernel of the config of the first of ``modules`` that has one; None when the
    outermost of them (the whole model) holds no attention layer."""
    present = [unwrap_model(module)[0] for module in modules if module is not None]
    for model in present:
        config = module_attr(model, "config", None)  # a compiled/DDP wrapper: its model's
        value = library_attr(config, "_attn_implementation", None) if config is not None else None
        if type(value) is str and value:
            return value if _has_attention(present[-1]) else None
    return None


def _training(module) -> bool | None:
    value = module_attr(module, "training", None) if is_module(module) else None
    return value if type(value) is bool else None


def _labels_and_cache(stack, modules) -> tuple[bool | None, str | None, int | None]:
    labels = cache = None
    length = None
    cache_seen = False
    for record in reversed(modules):
        local_map = _locals(stack[record.index][0])
        if "labels" in local_map and not labels:
            labels = local_map["labels"] is not None
        if cache_seen:
            continue
        for name in CACHE_NAMES:
            value = local_map.get(name, _ABSENT)
            is_cache = value is not _ABSENT and (looks_like_cache(value) or is_kv_pair(value))  # a lazy `cache` is not
            if value is None or is_cache:
                cache_seen = True
                cache = "" if value is None else type(value).__name__
                length = None if value is None else cache_length(value)
                break
    return labels, cache, length


def path_summary(stack, index: int | None = None, root=None) -> PathSummary:
    """Usage: ``path_summary(pdb.stack, pdb.curindex)``; a ``PathSummary`` for the frame at ``index``."""
    if not stack:
        return PathSummary()
    index = len(stack) - 1 if index is None else max(0, min(index, len(stack) - 1))
    user_root = root if is_module(root) else None
    entries = model_stack(stack[: index + 1], user_root)
    modules = [e.module for e in entries if e.module is not None]
    inner = next((m for m in reversed(modules) if not m.wrapper), modules[-1] if modules else None)
    labels, cache, length = _labels_and_cache(stack, modules)
    finished = not _running(stack[index][0])
    grad, inference = (None, False) if finished else _grad_state()
    target = inner.module if inner is not None else user_root
    outer = modules[0].module if modules else None
    model_class = type(unwrap_model(target)[0]).__name__ if inner is None and target is not None else None
    generating = any(_GENERATION_DIR in frame.f_code.co_filename and frame.f_code.co_name == "generate"
                     for frame, _ in stack[: index + 1])
    compiled = compiled_context(stack[index][0])
    wrapped = [m.wrapper for m in modules if m.wrapper]
    if user_root is not None:
        wrapped += [kind for _, kind, _ in unwrap_model(user_root)[1]]
    if compiled is None and "torch.compile" in wrapped:
        compiled = "a torch.compile'd model (OptimizedModule)"
    return PathSummary(
        module=inner, model_class=model_class, training=_training(target), grad=grad,
        inference_mode=inference, autocast=() if finished else _autocast_state(), labels=labels, cache=cache,
        cache_length=length, attn_implementation=_attn_implementation(target, outer, user_root),
        compiled=compiled, generating=generating, finished=finished)
