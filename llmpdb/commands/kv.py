"""The ``kv`` command: the KV cache in reach of the frame, one layer in detail, its growth across stops.

Usage (at the prompt)::

    kv                      find the cache (past_key_values, cache, outputs.cache, any cache local, self.*),
                            else in the enclosing model frames (inside LlamaMLP.forward: the decoder layer's)
    kv EXPR                 the cache EXPR evaluates to (or EXPR.cache / EXPR.past_key_values); one
                            layer's (k, v) pair is shown as such
    kv 0  |  kv cross:1     one layer in detail: every tensor it holds
    kv 0 --stats            ... with min/max/mean/std/NaN/Inf of each tensor (reads values)
    kv --history            how the cache grew across the stops of this session

From Python (the lead's stop hook): ``record_kv_history(frame.f_locals, frame=frame)`` records the growth at
each stop (metadata only; the enclosing model frames are searched when the frame holds no cache). Every
``kv`` run records too.
"""

from __future__ import annotations

import re
import sys
import weakref
from typing import Any, TYPE_CHECKING

from ..session import SESSION, register_stop_note
from ._command import CommandError, command, parse_args

if TYPE_CHECKING:  # annotations only: the module is imported at first use
    from ..inspect.kv import CacheReport, KvHistoryEntry

__all__ = ["KvCommands", "KvArgs", "parse_kv_args", "record_kv_history", "kv_history", "HISTORY_KEY"]

HISTORY_KEY = "kv-history"
HISTORY_LIMIT = 500
USAGE = "kv [EXPR] [LAYER] [--stats] [--history]"
_LAYER = re.compile(r"^(?:(self|cross)[:.])?(-?\d+)$")


class KvArgs:
    """Parsed ``kv`` arguments: ``expr`` (may be ""), ``layer``/``part`` (None when absent), flags."""

    def __init__(self, expr: str = "", layer: int | None = None, part: str | None = None,
                 stats: bool = False, history: bool = False):
        self.expr, self.layer, self.part, self.stats, self.history = expr, layer, part, stats, history

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KvArgs) and vars(self) == vars(other)

    def __repr__(self) -> str:
        return f"KvArgs({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"


def _layer_spec(text: str) -> tuple[int, str | None] | None:
    match = _LAYER.match(text)
    return (int(match.group(2)), match.group(1)) if match else None


def _layer_option(text: str) -> tuple[int, str | None]:
    spec = _layer_spec(text)
    if spec is None:
        raise CommandError(f"bad layer {text!r} (a number, or self:N / cross:N)")
    return spec


def parse_kv_args(arg: str) -> KvArgs:
    """Usage: ``parse_kv_args("outputs.cache 1 --stats")`` -> ``KvArgs(expr="outputs.cache", layer=1, ...)``.

    LAYER is ``N`` (negative counts from the end) or ``self:N`` / ``cross:N`` for encoder-decoder caches,
    given last or as ``--layer N``; the expression keeps its quotes and spaces.
    """
    args = parse_args(arg, USAGE, flags={"--stats", "--history"}, options={"--layer": _layer_option},
                      aliases={"-l": "--layer"})
    text, spec = args.rest, args.value("--layer")
    if spec is None and len(args.words) >= 1:
        spec = _layer_spec(args.words[-1])
        if spec is not None:
            text = args.rest[: len(args.rest) - len(args.words[-1])].rstrip()
    layer, part = spec if spec is not None else (None, None)
    if args.flag("--stats") and layer is None:
        raise CommandError("--stats shows the values of one layer: give it, e.g. `kv 0 --stats`")
    return KvArgs(text, layer, part, args.flag("--stats"), args.flag("--history"))


def kv_history() -> list[KvHistoryEntry]:
    """Usage: ``kv_history()``; the entries recorded so far in this process (oldest first)."""
    return SESSION.memory(HISTORY_KEY, list)


def _cache_serial(cache: Any, path: str) -> int:
    """A session-unique number per cache object (ids are reused after GC: a weakref tells them apart).

    Tuple caches cannot be weakly referenced and are rebuilt at every step: they are told apart by path.
    """
    serials = SESSION.memory("kv-history-serials", dict)
    try:
        ref = weakref.ref(cache)
    except TypeError:
        key: Any = ("path", path, type(cache).__name__)
        ref = None
    else:
        key = ("id", id(cache))
    known = serials.get(key)
    if known is not None and (ref is None or known[0]() is cache):
        return known[1]
    serial = len(serials) + 1
    serials[key] = (ref, serial)
    return serial


def _record(report: CacheReport, cache: Any, path: str) -> KvHistoryEntry:
    """Append an entry unless the latest one for this cache shows the same state (nothing grew)."""
    from ..inspect.kv import history_entry
    entries = kv_history()
    entry = history_entry(report, stop=SESSION.stop, cache_id=_cache_serial(cache, path), path=path)
    last_same = next((e for e in reversed(entries) if e.cache_id == entry.cache_id), None)
    if last_same is None or not last_same.same_state(entry):
        entries.append(entry)
        del entries[:-HISTORY_LIMIT]
    return entry


def record_kv_history(local_vars: dict[str, Any], *, cache: Any = None, path: str = "",
                      frame: Any = None) -> KvHistoryEntry | None:
    """Usage: ``record_kv_history(frame.f_locals, frame=frame)`` at each stop; cheap (metadata, one scalar).

    Finds the cache like ``kv`` does (or takes ``cache``; with ``frame``, the enclosing model frames are
    searched when the locals hold none), and appends an entry to the session's history when the cache grew
    or changed since the last entry. Returns the entry, or None when there is no cache in reach. Never
    raises: a failure is kept in ``SESSION.memory("kv-history-errors", list)``.
    """
    from ..inspect.kv import find_cache, find_enclosing_cache, inspect_cache
    try:
        if cache is None:
            found = find_cache(local_vars)
            if found is None and frame is not None:
                found = find_enclosing_cache(frame.f_back)
            if found is None:
                return None
            path, cache = found[0], found[1]
        return _record(inspect_cache(cache), cache, path)
    except Exception as exc:  # an automatic per-stop hook must never disturb the stop
        SESSION.memory("kv-history-errors", list).append(f"stop {SESSION.stop}: {type(exc).__name__}: {exc}")
        return None


class KvCommands:
    """Command mixin: ``kv``."""

    @command
    def do_kv(self, arg):
        """kv [EXPR] [LAYER] [--stats] [--history]
        The KV cache in reach of this frame: one summary line (class, layers, filled length, kv heads /
        q heads with the GQA group size when a model config is in reach, head_dim, dtype, device, bytes),
        a memory line comparing the bytes with 2 × layers × kv_heads × head_dim × seq × bytes (and why they
        differ: static capacity, sliding window, quantization, cross-attention), then one row per layer
        (type, keys/values shapes, filled/capacity, window; linear-attention states; quantized tokens).
        Found by itself (past_key_values, cache, outputs.cache, model_kwargs['cache'], any cache local,
        self.*; then the same names in the enclosing model frames, saying which frame) or given as EXPR;
        EXPR may be one layer's (k, v) pair. Works for every transformers cache class, the key_cache/value_cache
        lists of 4.4x-4.5x and ((k, v), ...) tuples. No tensor data is read (one length scalar of a
        static cache at most).
        LAYER       N, -1 (last), or self:N / cross:N (encoder-decoder); also --layer N. Every tensor of
                    that layer with shape, dtype, device and bytes.
        --stats     with LAYER: min/max/mean/std and NaN/Inf counts, computed on the tensor's device.
        --history   the growth across the stops of this session (seq 7 -> 8 -> 9, one row per stop).
        Example: kv outputs.past_key_values -1"""
        from ..inspect.config import locate_config
        from ..inspect.frames import frame_locals
        from ..inspect.kinds import is_module, module_attr
        from ..inspect.kv import NotACacheError, SEARCHED, inspect_cache, is_kv_pair
        from ..render.kv import render_history
        from ..render.table import wrap_lines
        args = parse_kv_args(arg)
        local_vars = self.frame_locals()
        style, width = self.out_style(), self.out_width()
        skipped: list[str] = []
        found = self._kv_find(args.expr, local_vars, skipped)
        where = None
        if found is None and not args.expr:
            enclosing = self._kv_find_enclosing(skipped)
            if enclosing is not None:
                found, where = enclosing[:2], enclosing[2]
        if skipped:
            self.message(style.warn(f"skipped {', '.join(skipped)}: raised while looked at"))
        if found is None and not args.history:
            raise CommandError("no KV cache in this frame or the model frames around it\n"
                               + wrap_lines(f"  (looked at {SEARCHED})", width))
        if found is not None and is_kv_pair(found[1]) and not args.history:
            self.message(self._kv_pair(found[0], found[1], args, width, style))
            return
        if found is not None:
            path, cache = found
            located = locate_config(local_vars) or (locate_config(frame_locals(where)) if where else None)
            try:
                report = inspect_cache(cache, config=located[0] if located else None)
            except NotACacheError as exc:
                raise CommandError(f"{path} is {exc}") from None
            _record(report, cache, path)
            if not args.history:
                if where is not None:
                    self.message(style.dim(f"cache from {self._kv_frame_name(where)}: {path}"))
                self.message(self._kv_render(report, path, args, width, style))
                owner = local_vars.get("self")
                here = module_attr(owner, "layer_idx", None) if is_module(owner) else None
                if args.layer is None and not args.expr and type(here) is int:
                    self.message(style.dim(f"this frame is layer {here} (self.layer_idx)"))
                return
        self.message(render_history(kv_history(), width=width, style=style))
        errors = SESSION.memory("kv-history-errors", list)
        if errors:
            self.message(style.warn(f"history recording failed {len(errors)}×, last: {errors[-1]}"))

    def _kv_find_enclosing(self, skipped: list[str]):
        """(path, cache, frame) from the frames around the current one, or None."""
        from ..inspect.kv import find_enclosing_cache
        frame = self.current_frame()
        return find_enclosing_cache(frame.f_back, skipped=skipped) if frame is not None else None

    def _kv_frame_name(self, frame) -> str:
        """``LlamaDecoderLayer.forward (frame 26)``: the function and its number in ``where``."""
        code = frame.f_code
        name = getattr(code, "co_qualname", code.co_name)
        number = next((i for i, (f, _) in enumerate(self.stack_frames()) if f is frame), None)
        return f"{name} (frame {number})" if number is not None else name

    def _kv_pair(self, path: str, pair: Any, args: KvArgs, width: int, style) -> str:
        """One layer's ``(keys, values)``: what it is, its two tensors, and where the whole cache is."""
        from ..inspect.kv import inspect_cache
        from ..inspect.stats import no_stats_reason, tensor_stats
        from ..render.kv import render_layer
        report = inspect_cache([pair])
        layer = report.layers[0]
        if args.layer not in (None, 0, -1):
            raise CommandError(f"{path} is one layer's (keys, values) pair: it has no layer {args.layer}")
        stats = None
        if args.stats:
            stats = {m.name: tensor_stats(m.tensor) or (no_stats_reason(m.tensor) or "no values")
                     for m in layer.tensors}
        lines = [f"{path} is one layer's (keys, values) pair, not a whole cache"]
        if layer.filled is not None:
            lines.append(f"seq {layer.filled}  kv heads {layer.kv_heads}  head_dim {layer.head_dim}  "
                         "(read as batch · kv_heads · seq · head_dim)")
        table = render_layer(report, layer, stats=stats, width=width, style=style).split("\n", 1)
        lines += [table[-1], style.dim("`kv` alone finds the whole cache (this frame, then the model frames around it)")]
        return "\n".join(lines)

    def _kv_find(self, expr: str, local_vars: dict, skipped: list[str]) -> tuple[str, Any] | None:
        from ..inspect.kv import find_cache, is_kv_pair, unwrap_cache
        from ..inspect.safe import type_name
        if not expr:
            return find_cache(local_vars, skipped=skipped)
        value = self.eval_in_frame(expr)
        try:
            if is_kv_pair(value):
                return expr, value
            unwrapped = unwrap_cache(value)
        except Exception as exc:  # a tensor subclass that raises when its rank is read
            raise CommandError(f"{expr}: {type(exc).__name__} while looking at it: {exc}") from None
        if unwrapped is None:
            raise CommandError(f"{expr} is a {type_name(value)}, not a KV cache "
                               "(no .layers, .key_cache/.value_cache, (k, v) tuples, .cache or .past_key_values)")
        return expr + unwrapped[0], unwrapped[1]

    def _kv_render(self, report: CacheReport, path: str, args: KvArgs, width: int, style) -> str:
        from ..inspect.stats import no_stats_reason, tensor_stats
        from ..render.kv import render_cache, render_layer
        if args.layer is None:
            return render_cache(report, width=width, style=style, path=path)
        part = args.part or report.parts[0]
        if part not in report.parts:
            raise CommandError(f"{path} has no {part} part (parts: {', '.join(p for p in report.parts if p) or 'one'})")
        count = len(report.part_layers(part))
        index = args.layer + count if args.layer < 0 else args.layer
        layer = report.layer(index, part)
        if layer is None:
            where = f"{part} " if part else ""
            raise CommandError(f"no {where}layer {args.layer} in {path} ({count} layers: 0-{count - 1})"
                               if count else f"no {where}layer {args.layer}: {path} has no layers yet")
        stats = None
        if args.stats:
            stats = {m.name: tensor_stats(m.tensor) or (no_stats_reason(m.tensor) or "no values")
                     for m in layer.tensors}
        return render_layer(report, layer, stats=stats, width=width, style=style)


@register_stop_note
def kv_growth_note(frame, debugger) -> None:
    """Record the KV cache in reach (metadata only) so ``kv --history`` covers every stop, typed or not."""
    if "torch" not in sys.modules:
        return None  # no tensor, so no cache, exists yet (and the cache finder stays unimported)
    record_kv_history(debugger.frame_locals(), frame=debugger.current_frame())
    return None
