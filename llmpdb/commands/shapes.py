"""The ``shapes`` command: every tensor in the frame (or in one expression), as a table.

Usage (at the prompt)::

    shapes                  every tensor reachable from the current frame's locals
    shapes inputs           one expression, walked the same way (paths start with its text)
    shapes --stats          add min/max/mean/std and NaN/Inf counts (reads tensor data)
    shapes --no-stats       without them, when the config file's ``[shapes] stats = true`` adds them

Defaults come from the config file's ``[shapes]`` table (``config_file``); a flag on the line wins.

Dimension names come from the tensor's role (``inspect.dims_roles``: in a KV cache, ``logits``...), the
model config in reach of the frame (``self.config``, ``config``, ``model``, else an enclosing module
frame's) and the inputs (``input_ids``/``hidden_states`` here or in an enclosing frame: batch, seq). Inside ``torch.compile``d code a note
says that graph-computed locals may be missing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._command import CommandError, command, parse_args

if TYPE_CHECKING:  # annotations only: the modules are imported at first use
    from ..render.style import Style

__all__ = ["ShapesCommands", "parse_shapes_args", "render_frame_shapes"]

USAGE = "shapes [EXPR] [--stats] [--no-stats]"


def parse_shapes_args(arg: str, stats_default: bool = False) -> tuple[str, bool]:
    """Usage: ``parse_shapes_args("inputs['input_ids'] --stats")`` -> ``("inputs['input_ids']", True)``.

    The expression keeps its quotes and spaces (no shell splitting); an unknown ``--option`` is an error.
    Without ``--stats``/``--no-stats`` statistics are ``stats_default`` (the config file's).
    """
    args = parse_args(arg, USAGE, flags={"--stats", "--no-stats"})
    if args.flag("--stats") and args.flag("--no-stats"):
        raise CommandError(f"--stats and --no-stats together (usage: {USAGE})")
    stats = True if args.flag("--stats") else False if args.flag("--no-stats") else stats_default
    return args.rest, stats


def render_frame_shapes(locals_: dict, frame, *, width: int, style: Style, stats: bool = False,
                        namer_of=None) -> str:
    """Usage: ``render_frame_shapes(frame_locals(frame), frame, width=100, style=Style())``; the table
    ``shapes`` prints for a frame's locals. ``namer_of(locals_, frame)``: the DimNamer (default: the frame's)."""
    from ..inspect.dims import DimNamer
    from ..inspect.tensors import frame_tensors
    from ..render.tensors import render_tensors
    walk = frame_tensors(locals_, stats=stats)
    namer = (namer_of or DimNamer.from_frame)(locals_, frame=frame) if walk else None
    return render_tensors(walk, width=width, style=style, namer=namer, stats=stats,
                          empty="no tensors in this frame's locals")


class ShapesCommands:
    """Command mixin: ``shapes``."""

    def shapes_namer(self, locals_: dict, frame):
        """The dimension names ``shapes`` uses: the frame's (``open`` answers with the ones saved at the stop)."""
        from ..inspect.dims import DimNamer
        return DimNamer.from_frame(locals_, frame=frame)

    @command
    def do_shapes(self, arg):
        """shapes [EXPR] [--stats] [--no-stats]
        Every tensor in the current frame's locals, or inside EXPR: access path (outputs.logits,
        inputs['input_ids'], cache.layers[0].keys), shape, dtype, device (when not all on cpu), size,
        grad_fn (leaf = requires grad), flags (non-contiguous, meta, sparse, quantized, DTensor, fake,
        Parameter, nested) and dimension names (batch · heads · seq · head_dim) by the tensor's role
        (in a KV cache, logits, attn_weights...) or by its size; ? when unknown or shared. Searches
        dict, list, tuple, named tuples, dataclasses, ModelOutput, BatchEncoding, KV-cache objects and
        small plain objects.
        Modules and optimizers in the frame are summarized on one line each; `shapes model` lists a
        module's parameters and buffers. No tensor data is read unless --stats is given.
        --stats   add min/max/mean/std (NaN/Inf ignored) and NaN/Inf counts, computed on each
                  tensor's own device with one transfer per tensor; none for meta/fake tensors.
        --no-stats  no statistics even when the config file's [shapes] stats = true.
        Example: shapes outputs --stats"""
        from ..render.config_file import config
        from ..inspect.compiled import compiled_note
        from ..inspect.safe import type_name
        from ..inspect.tensors import walk_tensors
        from ..render.tensors import render_tensors
        expr, stats = parse_shapes_args(arg, bool(config().shapes.get("stats", False)))
        locals_ = self.frame_locals()
        value = self.eval_in_frame(expr) if expr else None
        note = compiled_note(self.current_frame())
        style = self.out_style()
        if note:
            self.message_once(note, style.warn(note))  # not again when the stop already said it
        if not expr:
            self.message(render_frame_shapes(locals_, self.current_frame(), width=self.out_width(), style=style,
                                             stats=stats, namer_of=self.shapes_namer))
            return
        walk = walk_tensors(value, expr, stats=stats)
        namer = self.shapes_namer(locals_, self.current_frame()) if walk else None
        self.message(render_tensors(walk, width=self.out_width(), style=style, namer=namer, stats=stats,
                                    empty=f"no tensors in {expr} ({type_name(value)})"))
