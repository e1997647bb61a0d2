"""Tensor records to a table.

Usage::

    print(render_tensors(frame_tensors(locals), width=100, namer=DimNamer.from_frame(locals)))

Columns: ``path shape dtype [device] size [grad] [flags] [dims]``, or with ``stats=True``
``path shape dtype [device] size [flags] min max mean std [nan] [inf] [dims]`` (``-`` where a tensor has no
statistic; ``nan``/``inf`` only when some count is not zero). ``device`` is shown only when some tensor is
not on the CPU; ``grad``/``flags``/``dims`` only when some row has content. ``grad`` holds the ``grad_fn``
class, or ``leaf`` for a tensor that requires grad without one. Sizes are binary (``448 B``,
``18.0 KiB``); numbers keep three significant digits.

Fitting ``width`` (``_STEPS``, in order and only while too wide): ``grad`` drops its ``Backward0`` suffix,
``dims`` its spaces, ``flags`` abbreviates; the ``grad`` column is hidden; paths are cut in the middle to 24
characters, keeping more of the tail (``outputs…layers[0].values``); ``dims`` abbreviate their long names
(``batch·kvh·seq·hd``), then all (``b·kvh·s·hd``), with a legend; ``flags`` are cut to 10; paths to 16; the
``size`` column is hidden, then ``flags``; paths are cut to 12; ``dims``, ``std``, ``mean``, ``dtype``,
``device`` are hidden; paths are cut to 6. A shape is never cut; a hidden column is named below the table. Colour (a ``Style`` with colour on):
paths, dtypes, devices and flags in their roles' colours, applied after fitting.
Below the table: the tensor count and total size (each tensor counted once, aliases named), what the walk
left out, where dimension names came from, then the modules and optimizers that were summarized rather than
listed.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence

from ..inspect.dims import DimNamer
from ..inspect.tensors import ObjectSummary, TensorInfo
from ..units import format_number, format_shape, human_bytes, human_count, plural
from .style import Style
from .table import fit_columns, fit_text, render_table

__all__ = ["render_tensors", "render_objects", "cut_path"]


def _grad(info: TensorInfo) -> str:
    if info.grad_fn:
        return info.grad_fn
    return "leaf" if info.requires_grad else ""


def _shown_flag(flag: str, info: TensorInfo) -> bool:
    """Aliases go to the footer; ``meta`` is not repeated when the device column already says it."""
    return not flag.startswith("same as ") and not (flag == "meta" and info.device == "meta")


def _dims(namer: DimNamer | None, info: TensorInfo) -> str:
    """Parameters never have a batch dimension; everything else is read batch-first."""
    if namer is None:
        return ""
    return namer.describe(info.shape, batched="Parameter" not in info.flags, path=info.path,
                          index=info.dtype in ("i32", "i64"))


def _wrap(line: str, width: int) -> list[str]:
    return textwrap.wrap(line, width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False) or [""]


def _unsearched(infos: Sequence[TensorInfo]) -> str:
    unsearched = getattr(infos, "unsearched", 0)
    if not unsearched:
        return ""
    limits = getattr(infos, "limits", {})
    return (f"; {unsearched} containers/entries not searched (limits: depth {limits.get('max_depth', '?')}, "
            f"{limits.get('max_entries', '?')} entries per container)")


def _footer(infos: Sequence[TensorInfo], stats: bool, namer: DimNamer | None, named: bool) -> list[str]:
    unique = [i for i in infos if not any(f.startswith("same as ") for f in i.flags)]
    meta = [i for i in unique if i.device == "meta"]  # no storage: their size is what they would take
    fake = [i for i in unique if i.device != "meta" and "fake" in i.flags]  # FakeTensor, FunctionalTensor
    allocated = sum(i.nbytes for i in unique if i.device != "meta" and "fake" not in i.flags)
    line = f"{plural(len(infos), 'tensor')}, {human_bytes(allocated)} total"
    if meta:
        line += f" (+ {human_bytes(sum(i.nbytes for i in meta))} on the meta device, not allocated)"
    if fake:
        line += f" (+ {human_bytes(sum(i.nbytes for i in fake))} fake, not allocated)"
    aliases = [f"{i.path} = {f[8:]}" for i in infos for f in i.flags if f.startswith("same as ")]
    left_out = getattr(infos, "left_out", 0)
    limits = getattr(infos, "limits", {})
    if left_out:
        line += f"; {left_out} more not listed (limit {limits.get('max_items', '?')})"
    lines = [line + _unsearched(infos)]
    if aliases:
        lines.append("same tensor, counted once: " + ", ".join(aliases))
    if named and namer is not None:
        dims = [_dims(namer, i) for i in infos]
        legend = ["? = unknown or shared size"] if any("?" in d for d in dims) else []
        source = namer.source or ""
        if source:  # "from self.config (LlamaConfig), batch/seq from x", or with no config "; seq from x"
            source = f": {source}" if source.startswith(("batch/seq ", "seq ", "self (")) else f" from {source}"
        lines.append(f"dims{source}" + (f"; {', '.join(legend)}" if legend else ""))
    elif namer is not None and (namer.source or "").startswith("config ?: "):  # two models' configs in sight
        lines.append(f"no dims: {namer.source} (which one these tensors belong to is not known)")
    if stats:
        counted = [i for i in infos if i.stats is not None]
        clean = not any(i.stats.nan or i.stats.inf for i in counted)
        if counted:
            partial = getattr(infos, "left_out", 0) or getattr(infos, "unsearched", 0)
            scope = "in the listed tensors (the walk stopped at its limits)" if partial else "in any tensor"
            legend = f"; no NaN or Inf {scope}" if clean else " (counted in nan/inf)"
            lines.append(f"min/max/mean/std ignore NaN and Inf{legend}; std is unbiased")
        skipped = [i for i in infos if i.stats is None]
        if skipped:
            why = sorted({f for i in skipped for f in i.flags if f in ("meta", "fake", "sparse", "nested", "DTensor")})
            lines.append(f"no statistics for {plural(len(skipped), 'tensor')}"
                         + (f" ({', '.join(why)}: no readable data, nothing computed)" if why else ""))
        magnitudes = [i.path for i in infos if i.stats is not None and i.stats.of != "value"]
        if magnitudes:
            lines.append(f"complex tensors ({', '.join(magnitudes)}): statistics of |z|")
    return lines


def cut_path(path: str, limit: int) -> str:
    """Usage: ``cut_path("outputs.cache.layers[0].values", 24)`` -> ``"outputs…layers[0].values"``.

    Keeps a third of the room for the head (the local's name) and the rest for the tail, which tells rows
    apart (``layers[3].keys``)."""
    if len(path) <= limit:
        return path
    if limit <= 1:
        return "…"[:limit]
    head = (limit - 1) // 3
    return path[:head] + "…" + path[len(path) - (limit - 1 - head):]


_ABBREV = {"batch": "b", "seq": "s", "q_seq": "qs", "k_seq": "ks", "tokens": "tok", "heads": "h",
           "kv_heads": "kvh", "head_dim": "hd", "hidden": "hid", "intermediate": "ffn", "vocab": "voc",
           "q_dim": "qd", "kv_dim": "kvd", "qkv": "qkv", "experts": "exp", "top_k": "topk",
           "qk_head_dim": "qkd", "qk_nope_head_dim": "nope", "qk_rope_head_dim": "rope", "v_head_dim": "vd",
           "kv_lora_rank": "kvr", "q_lora_rank": "qr",
           "ssm_inner": "inner", "conv_kernel": "ck", "ssm_state": "st"}
_LONG = ("kv_heads", "head_dim", "intermediate", "experts", "qk_head_dim", "qk_nope_head_dim", "qk_rope_head_dim",
         "v_head_dim", "kv_lora_rank", "q_lora_rank", "ssm_inner", "conv_kernel", "ssm_state")  # abbreviated first, the short names kept


def _abbreviate_dims(text: str, only: Sequence[str] | None = None) -> str:
    names = text.replace(" · ", "·").split("·") if text else []
    return "·".join(_ABBREV.get(n, n) if only is None or n in only else n for n in names) if text else text


def _drop_backward(text: str) -> str:
    return re.sub(r"Backward\d*$", "", text) or text


# How the table fits its width, in order, each step only while it is still too wide (docs/commands.md).
_STEPS: tuple[tuple, ...] = (
    ("rewrite", "grad", _drop_backward),
    ("rewrite", "dims", lambda text: text.replace(" · ", "·")),
    ("rewrite", "flags", lambda text: text.replace("non-contiguous", "non-contig")),
    ("hide", "grad"),
    ("cut", "path", 24, cut_path),
    ("rewrite", "dims", lambda text: _abbreviate_dims(text, _LONG)),
    ("rewrite", "dims", _abbreviate_dims),
    ("cut", "flags", 10),
    ("cut", "path", 16, cut_path),
    ("hide", "size"),
    ("hide", "flags"),
    ("cut", "path", 12, cut_path),
    ("hide", "dims"),
    ("hide", "std"),
    ("hide", "mean"),
    ("hide", "dtype"),
    ("hide", "device"),
    ("cut", "path", 6, cut_path),
)
_OBJECT_STEPS: tuple[tuple, ...] = (
    ("cut", "detail", 16), ("cut", "class", 16), ("cut", "object", 16), ("hide", "detail"),
    ("hide", "device"), ("cut", "class", 10), ("cut", "object", 10), ("hide", "dtype"), ("hide", "params"),
)


def _hidden_line(hidden: Sequence[str], width: int) -> list[str]:
    if not hidden:
        return []
    return fit_text(f"{', '.join(hidden)} column{'s' * (len(hidden) > 1)} hidden to fit {width} columns", width)


def _legend(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """The abbreviations used in a ``dims`` column that had to be abbreviated."""
    if "dims" not in headers:
        return []
    col = headers.index("dims")
    used = {part for row in rows for part in row[col].split("·")}
    pairs = [f"{short} {name}" for name, short in _ABBREV.items() if short in used and short != name]
    return ["dims abbreviated: " + ", ".join(pairs)] if pairs else []


def _colour_columns(headers: Sequence[str], rows: list[list[str]], style: Style, first: str = "path") -> None:
    """Colour the cells of a fitted table in place (after fitting: colour codes never count against width)."""
    roles = {first: style.path, "dtype": style.dtype, "device": style.device, "flags": style.flag}
    for col, name in enumerate(headers):
        paint = roles.get(name)
        if paint is not None:
            for row in rows:
                row[col] = paint(row[col]) if row[col] not in ("", "-") else row[col]


def render_objects(objects: Sequence[ObjectSummary], *, width: int = 100, style: Style = Style()) -> str:
    """Usage: ``render_objects(walk.objects)``; one row per module/optimizer summarized by the walk."""
    headers = ["object", "class", "params", "dtype", "device", "size", "detail"]
    rows = [[o.path, o.type_name, human_count(o.params) if o.kind == "module" else "",
             "+".join(o.dtypes) or "-", "+".join(o.devices) or "-", human_bytes(o.nbytes), o.detail]
            for o in objects]
    headers, rows, hidden = fit_columns(headers, rows, width, _OBJECT_STEPS)
    _colour_columns(headers, rows, style, first="object")
    right = [i for i, name in enumerate(headers) if name in ("params", "size")]
    lines = [render_table(headers, rows, width=width, shrink=(), right=right, style=style)]
    lines += [style.dim(line) for line in _hidden_line(hidden, width)]
    return "\n".join(lines)


def render_tensors(
    infos: Sequence[TensorInfo],
    *,
    width: int = 100,
    style: Style = Style(),
    namer: DimNamer | None = None,
    stats: bool = False,
    empty: str = "no tensors found",
) -> str:
    """Usage: ``render_tensors(walk, width=100, namer=namer, stats=True)``; the table plus footer lines.

    ``infos`` may be a plain list or a ``TensorWalk`` (whose ``objects``, ``notes``, ``left_out`` and
    ``unsearched`` are rendered too). ``grad``/``flags``/``dims`` columns appear only when some row has
    content for them; with ``stats`` the ``grad`` column gives way to the statistics (``dims`` stays, last).
    ``empty`` is the line printed when there is no tensor at all.
    """
    objects = getattr(infos, "objects", [])
    notes = getattr(infos, "notes", [])
    out: list[str] = []
    if infos:
        columns: dict[str, list[str]] = {
            "path": [i.path for i in infos],
            "shape": [format_shape(i.shape) for i in infos],
            "dtype": [i.dtype for i in infos],
            "device": [i.device for i in infos],
            "size": [human_bytes(i.nbytes) for i in infos],
            "grad": [_grad(i) for i in infos],
            "flags": [", ".join(f for f in i.flags if _shown_flag(f, i)) for i in infos],
            "dims": [_dims(namer, i) for i in infos],
        }
        named = any(columns["dims"])
        keep = ["path", "shape", "dtype"] + (["device"] if any(d != "cpu" for d in columns["device"]) else [])
        keep += ["size"] + [c for c in ("grad", "flags") if any(columns[c]) and not (stats and c == "grad")]
        if stats:
            values = [[format_number(v) for v in (s.min, s.max, s.mean, s.std, s.nan, s.inf)]
                      if (s := i.stats) is not None else ["-"] * 6 for i in infos]
            for k, name in enumerate(("min", "max", "mean", "std", "nan", "inf")):
                columns[name] = [v[k] for v in values]
                if k < 4 or any(v not in ("0", "-") for v in columns[name]):
                    keep.append(name)
        keep += ["dims"] if named else []
        rows = [[columns[c][r] for c in keep] for r in range(len(infos))]
        keep, rows, hidden = fit_columns(keep, rows, width, _STEPS)
        legend = _legend(keep, rows)
        _colour_columns(keep, rows, style)
        right = [i for i, c in enumerate(keep) if c in ("size", "min", "max", "mean", "std", "nan", "inf")]
        out.append(render_table(keep, rows, width=width, shrink=(), right=right, style=style))
        extra = legend + _hidden_line(hidden, width)
        for line in _footer(infos, stats, namer, named and "dims" in keep) + extra:
            out.extend(style.dim(part) for part in _wrap(line, width))
    else:
        out.append(empty + _unsearched(infos))
    if objects:
        out.extend(_wrap("modules and optimizers (summarized, not expanded; `shapes NAME` lists a module's tensors):",
                         width))
        out.append(render_objects(objects, width=width, style=style))
    out.extend(style.warn(note) for note in notes)
    return "\n".join(out)
