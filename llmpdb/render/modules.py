"""Text for model-aware navigation: the model stack, the path header, module breakpoints, where-forward.

Usage::

    render_model_stack(model_stack(stack), current=curindex, show_all=False, width=100)
    render_path_summary(path_summary(stack, curindex))      # "path: eval, no_grad, ... | model.layers.1..."
    render_module_breakpoints(engine.breakpoints())
    render_forward_location(forward_location(model))

Everything returns strings (no trailing newline) and never prints.
"""

from __future__ import annotations

import os
import shlex
import textwrap
from collections.abc import Sequence

from ..inspect.forward_location import ForwardLocation
from ..inspect.modules import ROOT_LABEL, ModuleFrame, StackEntry
from ..inspect.path_summary import PathSummary
from ..units import plural
from .style import Style, visible_len
from .table import fit_columns, render_table, table_width

__all__ = ["module_label", "render_model_stack", "render_path_summary", "render_module_breakpoints",
           "render_forward_location"]


def module_label(frame: ModuleFrame, *, others: bool = True, root_name: str | None = None) -> str:
    """Usage: ``module_label(mf)`` -> ``"model.layers.1.self_attn"``, ``"(root)"``, ``"[2] encoder"``...

    A wrapper's frame reads ``(torch.compile wrapper)``; a second model on the stack gets a ``[2] `` prefix;
    a shared module lists its other names: ``encoder.embed_tokens (also shared, decoder.embed_tokens)``.
    With ``root_name`` (the variable of the root, given when two models of one class are in sight) names
    start with it: ``teacher``, ``teacher.model.layers.1``, ``teacher (torch.compile wrapper)``.
    """
    def named(qualname: str) -> str:
        if root_name:
            return f"{root_name}.{qualname}" if qualname else root_name
        return qualname or ROOT_LABEL

    if frame.wrapper:
        text = f"{root_name} ({frame.wrapper} wrapper)" if root_name else f"({frame.wrapper} wrapper)"
    else:
        text = named(frame.qualname)
    if frame.tree and not root_name:
        text = f"[{frame.tree + 1}] {text}"
    extra = [named(n) for n in frame.other_names] if others and not frame.wrapper else []
    if extra:
        text += f" (also {', '.join(extra)})"
    return text


def _short_func(entry: StackEntry) -> str:
    if entry.hidden:
        return entry.func.rsplit(".", 1)[-1]
    return entry.func.replace("<locals>.", "")


def _stack_rows(entries, current, show_all, style, tensor_names: bool, root_names):
    rows = []
    hidden = 0
    for entry in entries:
        if entry.hidden and not show_all and entry.index != current:
            hidden += 1
            continue
        number = f"{'>' if entry.index == current else ''}#{entry.index}"
        record = entry.module
        if record is not None:
            tensor = ""
            if record.first_tensor is not None:
                tensor = record.first_tensor.summary()
                if not tensor_names:
                    tensor = tensor.split(" ", 1)[1]
            cls = record.class_name if record.func == "forward" else f"{record.class_name} ({record.func})"
            label = module_label(record, root_name=root_names.get(record.tree))
            rows.append([number, label, cls, record.location, tensor])
        elif entry.hidden:
            rows.append([style.dim(number), style.dim(_short_func(entry) + "()"), "", style.dim(entry.location), ""])
        else:
            rows.append([number, _short_func(entry) + "()", "", entry.location, ""])
    return rows, hidden


# How the tables fit their width: in order, each step only while still too wide (docs/commands.md).
STACK_STEPS: tuple[tuple, ...] = (
    ("hide", "first tensor"), ("hide", "class"), ("cut", "module / code", 24), ("cut", "at", 20),
    ("cut", "module / code", 12), ("cut", "at", 14), ("cut", "module / code", 8),
)
BREAKPOINT_STEPS: tuple[tuple, ...] = (
    ("cut", "armed on", 12), ("cut", "pattern", 16), ("cut", "condition", 12), ("hide", "calls"),
    ("hide", "hits"), ("cut", "pattern", 10), ("cut", "condition", 8), ("hide", "once"), ("hide", "after"),
)


def render_model_stack(entries: Sequence[StackEntry], *, current: int | None = None, show_all: bool = False,
                       width: int = 100, style: Style | None = None, root_names: dict | None = None) -> str:
    """Rows: module frames (qualified name, class, file:line, first tensor argument), your own code as
    ``function()``, and the plumbing only with ``show_all``; ``>#N`` marks the ``current`` frame.
    ``root_names`` (``{tree: variable}``) names the rows of those models from their variable.

    When the table is wider than ``width`` it gives up, in turn (``STACK_STEPS``): the tensor argument's
    name, the tensor column, the class column; then the module column is cut in the middle to 24
    characters (``model.la…self_attn``), the ``at`` column to 20, the module column to 12, ``at`` to 14,
    the module column to 8."""
    style = style or Style()
    headers = ["#", "module / code", "class", "at", "first tensor"]
    root_names = root_names or {}
    rows, hidden = _stack_rows(entries, current, show_all, style, tensor_names=True, root_names=root_names)
    if not rows:
        return "stack-model: no frames"

    if table_width(headers, rows) > width:
        rows, hidden = _stack_rows(entries, current, show_all, style, tensor_names=False, root_names=root_names)
    shown, rows, _ = fit_columns(headers, rows, width, STACK_STEPS)
    text = render_table(shown, rows, width=width, shrink=(), right=(0,), style=style)
    notes = []
    if not any(e.module is not None for e in entries):
        notes.append("(no module forward on the stack: set the model with `root-model EXPR`)")
    if hidden:
        notes.append(f"({hidden} plumbing frames hidden: stack-model --all shows them)")
    for note in notes:
        text += "".join("\n" + style.dim(line) for line in textwrap.wrap(note, max(width, 20), subsequent_indent=" "))
    return text


def render_path_summary(summary: PathSummary, style: Style | None = None, root_name: str | None = None,
                        width: int | None = None) -> str | None:
    """Usage: ``render_path_summary(s)`` -> ``"path: eval, no_grad, generate(), cache DynamicCache len 7,
    attn sdpa | model.layers.1.self_attn (LlamaAttention)"``; None when no model is in sight.
    ``root_name`` names the module from the root's variable (``teacher.model.layers.1.self_attn``).
    With ``width``, a line that would pass it breaks between its parts (continuation lines indented)."""
    style = style or Style()
    if summary.module is None and summary.model_class is None:
        return None
    parts = []
    if summary.training is not None:
        parts.append("train" if summary.training else "eval")
    if summary.inference_mode:
        parts.append("inference_mode")
    elif summary.grad is not None:
        parts.append("grad" if summary.grad else "no_grad")
    elif summary.finished:
        parts.append("grad/autocast ? (the frame ended)")
    for device, dtype in summary.autocast:
        parts.append(f"autocast {device} {dtype}")
    if summary.generating:
        parts.append("generate()")
    if summary.labels is not None:
        parts.append("labels" if summary.labels else "no labels")
    if summary.cache is not None:
        if not summary.cache:
            parts.append("no cache")
        else:
            length = f" len {summary.cache_length}" if summary.cache_length is not None else ""
            parts.append(f"cache {summary.cache}{length}")
    if summary.attn_implementation:
        parts.append(f"attn {summary.attn_implementation}")
    if summary.compiled:
        parts.append(style.warn("torch.compile"))
    if summary.module is not None:
        where = f"{module_label(summary.module, others=False, root_name=root_name)} ({summary.module.class_name})"
    else:
        where = f"model {summary.model_class} (not in a forward)"
    text = f"{style.header('path:')} {', '.join(parts)} | {where}"
    if width is None or visible_len(text) <= width:
        return text
    items = [part + "," for part in parts[:-1]] + parts[-1:] + ["| " + where]  # commas stay with their part
    lines = [style.header("path:")]
    for item in items:
        if len(lines) > 1 or lines[0] != style.header("path:"):
            if visible_len(lines[-1]) + 1 + visible_len(item) > width:
                lines.append("  " + item)
                continue
        lines[-1] += " " + item
    return "\n".join(lines)


def render_module_breakpoints(breakpoints: Sequence, *, width: int = 100, style: Style | None = None) -> str:
    """Usage: ``render_module_breakpoints(engine.breakpoints())``; a table, or a line saying there are none.
    A breakpoint armed on no module yet reads ``pending`` in the "armed on" column."""
    if not breakpoints:
        return "no module breakpoints (break-module PATTERN sets one)"
    rows = []
    for bp in breakpoints:
        modules = sorted(bp.labels.values())
        if not modules:
            where = "pending"
        elif len(modules) == 1 and modules[0] != bp.pattern:
            where = modules[0]
        else:
            where = plural(len(modules), "module")
        rows.append([str(bp.number), bp.pattern, bp.condition or "", str(bp.after) if bp.after else "",
                     "yes" if bp.once else "", where, str(bp.calls), str(bp.hits), str(bp.stops)])
    headers = ["num", "pattern", "condition", "after", "once", "armed on", "calls", "hits", "stops"]
    headers, rows, hidden = fit_columns(headers, rows, width, BREAKPOINT_STEPS)
    right = [i for i, name in enumerate(headers) if name in ("num", "after", "calls", "hits", "stops")]
    text = render_table(headers, rows, width=width, shrink=(), right=right, style=style)
    if hidden:
        text += "\n" + style.dim(f"{', '.join(hidden)} column{'s' * (len(hidden) > 1)} hidden to fit {width} columns")
    return text


def render_forward_location(location: ForwardLocation, *, edit: bool = False, editor: str | None = None,
                            style: Style | None = None) -> str:
    """Usage: ``render_forward_location(forward_location(model))``; one line per module on the way in,
    the last one being the forward that does the work, as ``function  path:line``.

    With ``edit`` a last line is added: a shell command that opens the file at the line (``$EDITOR +LINE PATH``).
    """
    style = style or Style()
    lines = []
    for depth, step in enumerate(location.steps):
        arrow = "  " * depth + ("-> " if depth else "")
        via = f"{step.via}: " if step.via else ""
        if step.filename is None:
            what = f"{step.class_name} (forward has no Python source: {step.function or 'a compiled wrapper'})"
            lines.append(f"{arrow}{via}{what}")
            continue
        where = style.path(f"{step.filename}:{step.lineno}")
        text = f"{arrow}{via}{step.function}  {where}"
        notes = []
        if step.instance_forward:
            notes.append("forward set on the instance")
        if step.decorators:
            notes.append("through " + ", ".join(step.decorators))
        if notes:
            text += f"  ({'; '.join(notes)})"
        lines.append(text)
    final = location.final
    if edit and final.filename is not None:
        command = editor or os.environ.get("EDITOR") or "vi"
        lines.append(f"{command} +{final.lineno} {shlex.quote(final.filename)}")
    return "\n".join(lines)
