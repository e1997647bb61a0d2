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
of the same weights get the same fingerprint.
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
    sizes = [t.numel() for t in tensors]
    flat = torch.cat([t.reshape(-1) for t in tensors]).to(wide)
    lengths = torch.tensor(sizes, device=device)
    head = torch.stack([torch.segment_reduce(flat, "sum", lengths=lengths),
                        torch.segment_reduce(flat * flat, "sum", lengths=lengths)], dim=1)
    ks = [min(samples, n) for n in sizes]
    k = torch.tensor(ks, device=device)
    offsets = torch.cumsum(lengths, 0) - lengths
    j = torch.arange(max(ks), device=device)
    index = offsets[:, None] + j[None, :] * lengths[:, None] // k[:, None]
    picked = flat[index[j[None, :] < k[:, None]]]
    return head, picked, ks
