"""The ``mem`` command: where the memory in sight goes.

Usage (at the prompt)::

    mem              CUDA counters, the 10 largest tensors of the frame, models / caches / optimizers
    mem --top 3      the 3 largest tensors only

Metadata only (``inspect.memory``): no tensor data is read and CUDA is never initialised by llmpdb.
"""

from __future__ import annotations

from ._command import CommandError, command, parse_args, whole_number

__all__ = ["MemCommands"]


_top = whole_number(1, 1_000_000)


class MemCommands:
    """Command mixin: ``mem``."""

    def _mem_caches(self, local_vars: dict) -> list[tuple[str, object]]:
        from ..inspect.kv import find_cache, find_enclosing_cache

        found = find_cache(local_vars)
        if found is None:
            frame = self.current_frame()
            enclosing = find_enclosing_cache(frame.f_back) if frame is not None else None
            found = enclosing[:2] if enclosing is not None else None
        return [found] if found is not None else []

    @command
    def do_mem(self, arg):
        """mem [--top N]
        Where the memory in sight goes: per CUDA device allocated / reserved / peak bytes (only when this
        process already initialised CUDA: llmpdb never does; else `CUDA: not in use`), the largest tensors
        reachable from the frame's locals (the walk of `shapes`; views and tensors sharing a storage counted
        once, under the first path, the others listed in `also`; meta, fake and functional tensors hold no
        memory: 0 bytes, labelled), then the parameters
        and buffers of each model in sight, their gradients, the KV cache in reach and the state of each
        optimizer (torch.optim.Optimizer) in the frame. Reads metadata only: shapes × element sizes.
        --top N   how many tensors to list (default 10).
        Example: mem --top 5"""
        from ..inspect.memory import (MemoryReport, cache_holdings, cuda_memory, find_optimizers, largest_tensors,
                                      model_holdings, optimizer_holdings)
        from ..inspect.root_names import models_in_sight
        from ..render.memory import render_memory

        args = parse_args(arg, self.do_mem, options={"--top": _top})
        if args.rest:
            raise CommandError(f"mem takes no expression, only --top N (got {args.rest!r}); "
                               f"shapes EXPR lists the tensors inside one")
        local_vars = self.frame_locals()
        rows, storages, total, notes = largest_tensors(local_vars, top=args.value("--top", 10))
        holdings = model_holdings(models_in_sight(self.stack_frames(), self.current_index()))
        holdings += cache_holdings(self._mem_caches(local_vars))
        holdings += optimizer_holdings(find_optimizers(local_vars))
        report = MemoryReport(cuda_memory(), tuple(rows), tuple(holdings), storages, total, tuple(notes))
        self.message(render_memory(report, width=self.out_width(), style=self.out_style()))
