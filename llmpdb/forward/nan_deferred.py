"""``nan-break --blocks`` on a GPU: each block's output is reduced on its device and the reductions are
read together at the end of the model's forward, one host sync per device instead of one per block.

Usage::

    reads = DeferredReads(flush_at={id(model)})
    reads.add(block, "output", t)      # in a block's hook: one reduction queued on t's device, no sync
    if reads.due(module):              # at the root's hook (or when many wait: a sub-model called alone)
        first = reads.first_bad()      # one read per device: a DeferredHit for the first bad block, or None

The reduction is ``device_sum(t)``: a 0-d float64 tensor on ``t``'s device, finite exactly when every
value of ``t`` is. Summing f16/bf16/f32 values in float64 cannot overflow (at most 3.4e38 per value,
fewer than 2**63 values), so a non-finite sum is a real NaN/Inf, never an overflow to confirm later:
the tensor itself is not kept (a block's output can be gigabytes); only its shape, dtype and device are,
for the header. float64 and complex128 take ``isfinite(t).all()`` instead; float8 kinds are widened.

On the CPU ``.item()`` costs no sync, so CPU tensors are read at once (``NanBreak``) unless
``cpu=True`` (tests and the bench count reads on the CPU that way: one per forward, as on a GPU).
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

__all__ = ["DeferredReads", "DeferredHit", "device_sum"]

LIMIT = 4096  # reductions waiting at most: a sub-model called without its root still gets read


def device_sum(t):
    """A 0-d float64 tensor on ``t``'s device, finite exactly when every value of ``t`` is (no sync)."""
    torch = sys.modules["torch"]
    dtype = t.dtype
    if dtype in (torch.float16, torch.bfloat16, torch.float32):
        return t.sum(dtype=torch.float64)
    if dtype in (torch.complex32, torch.complex64):
        return torch.view_as_real(t.to(torch.complex128) if dtype is torch.complex32 else t).sum(
            dtype=torch.float64)
    if dtype in (torch.float64, torch.complex128):  # no wider sum to take
        inf = torch.full((), float("inf"), dtype=torch.float64, device=t.device)
        return torch.where(torch.isfinite(t).all(), inf.new_zeros(()), inf)
    return t.to(torch.float32).sum(dtype=torch.float64)  # float8 kinds: no isfinite kernel of their own


class DeferredHit(SimpleNamespace):
    """The first block whose output was not finite: ``module``, ``path`` ("output", "output[0]") and
    ``tensor`` (its shape, dtype and device only, for ``tensor_summary``)."""


class DeferredReads:
    """The reductions of one forward, waiting to be read (see the module docstring)."""

    def __init__(self, flush_at: set[int], *, cpu: bool = False):
        self.flush_at = flush_at    # ids of the root modules: their hook runs last in a forward
        self.cpu = cpu              # defer CPU tensors too (tests, the bench)
        self.pending: list[tuple] = []
        self.reads = 0              # host reads made (one per device per flush, one more at a hit)

    def wanted(self, t) -> bool:
        """Whether ``t``'s check is deferred: a device tensor (not MPS: it has no float64, so it is read
        at once), or a CPU tensor with ``cpu``."""
        return self.cpu if t.is_cpu else not t.is_mps

    def add(self, module, path, t) -> None:
        self.pending.append((module, path, device_sum(t), t.shape, t.dtype, t.device))

    def due(self, module) -> bool:
        return bool(self.pending) and (id(module) in self.flush_at or len(self.pending) >= LIMIT)

    def first_bad(self) -> DeferredHit | None:
        """Read every pending reduction (one ``.item()`` per device); the first non-finite, or None."""
        torch = sys.modules["torch"]
        pending, self.pending = self.pending, []
        by_device: dict = {}
        for index, entry in enumerate(pending):
            by_device.setdefault(entry[5], []).append(index)
        first = None
        for device, indices in by_device.items():
            sums = torch.stack([pending[i][2] for i in indices])
            self.reads += 1
            if bool(torch.isfinite(sums).all()):
                continue
            self.reads += 1
            flags = torch.isfinite(sums).tolist()
            bad = next(i for i, ok in zip(indices, flags) if not ok)
            first = bad if first is None else min(first, bad)
        if first is None:
            return None
        module, path, _, shape, dtype, device = pending[first]
        return DeferredHit(module=module, path=path,
                           tensor=SimpleNamespace(shape=shape, dtype=dtype, device=device,
                                                  dim=lambda: len(shape), size=lambda i: shape[i]))
