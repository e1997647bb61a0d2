"""Fingerprints of many small tensors at once: a fixed handful of torch ops per batch, not a dozen per tensor.

Usage::

    head, samples, ks = batch_stats(tensors, wide, 256)   # one device and dtype, strided, real, non-empty
    # head[i] = [sum, sum of squares] of tensors[i] in float64; samples: the concatenated strided samples,
    # ks[i] of them tensors[i]'s. Both sums finite: no NaN and no Inf in that tensor (either one makes
    # the sum NaN or infinite), its counts are 0; else the caller fingerprints it on its own (``_stats``)

A 64-layer model has about 580 parameters, most of them small (norm weights, biases): one by one, each costs
about a dozen kernel launches (150 µs on a CPU), which made ``statediff snap`` take 110 ms. Here a batch is
flattened into one float64 vector (``torch.cat``: one copy of values the fingerprint reads anyway), and
reduced per tensor with two ``segment_reduce`` calls; the samples are the same elements
``fingerprint._stats`` takes (index ``i * numel // k`` in row-major order), gathered with one index.
Each tensor's sums are accumulated in its own segment, whatever else is in the batch, so two snapshots
of the same weights get the same fingerprint. The segment lengths and the sample positions depend only
on the sizes in a batch, and a model's batches repeat (each layer's, each snapshot's): they are laid
out once per batch shape (``_layout``, a bounded cache) instead of a dozen small ops each time.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BATCH", "SMALL", "batch_stats"]

BATCH = 1 << 15  # elements per batch: torch's grain size, so no batch wakes intra-op threads (on a busy
# 2-core machine 1 << 16 took 70 times longer), and its float64 copies stay in cache (20 MB page-fault)
SMALL = BATCH  # elements: larger tensors keep the per-tensor path (their kernels dwarf a launch)


def batch_stats(tensors: list[Any], wide: Any, samples: int) -> tuple[Any, Any, list[int]]:
    """``(head, samples, ks)`` for ``tensors`` (see the module's usage); values stay on their device."""
    import torch

    device = tensors[0].device
    sizes = tuple(t.numel() for t in tensors)
    lengths, index, ks = _layout(device, sizes, samples)
    flat = torch.cat([t.reshape(-1) for t in tensors]).to(wide)
    head = torch.stack([torch.segment_reduce(flat, "sum", lengths=lengths),
                        torch.segment_reduce(flat * flat, "sum", lengths=lengths)], dim=1)
    return head, flat[index], ks


_LAYOUTS: dict = {}  # (device, sizes, samples) -> (lengths, index, ks): a model's batches are the same each time
_LAYOUT_ELEMENTS = 1 << 20  # index elements kept at most (8 MB of int64 on each device); then it starts over


def _layout(device: Any, sizes: tuple[int, ...], samples: int) -> tuple[Any, Any, list[int]]:
    """The segment lengths and the flat positions of the samples of a batch of tensors of ``sizes``:
    computed once per batch shape (a dozen small ops, a third of a snapshot's time), then reused."""
    import torch

    key = (str(device), sizes, samples)
    found = _LAYOUTS.get(key)
    if found is not None:
        return found
    ks = [min(samples, n) for n in sizes]
    lengths = torch.tensor(sizes, device=device)
    k = torch.tensor(ks, device=device)
    offsets = torch.cumsum(lengths, 0) - lengths
    j = torch.arange(max(ks), device=device)
    index = offsets[:, None] + j[None, :] * lengths[:, None] // k[:, None]
    index = index[j[None, :] < k[:, None]]
    kept = sum(entry[1].numel() for entry in _LAYOUTS.values())
    if kept + index.numel() > _LAYOUT_ELEMENTS:
        _LAYOUTS.clear()
    _LAYOUTS[key] = (lengths, index, ks)
    return lengths, index, ks
