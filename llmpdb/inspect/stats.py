"""Value statistics of one tensor, computed only when the user asks (``shapes --stats``).

Usage::

    stats = tensor_stats(t)      # TensorStats(min=-2.1, max=3.0, mean=0.01, std=0.98, nan=0, inf=0) or None

Everything is computed on the tensor's own device with lazy reductions stacked into one small tensor, so
there is exactly one device-to-host transfer (one sync) per tensor. Low-precision floats are reduced in
float32 (float64 stays float64), integers and bools in float64 (float32 on MPS, which lacks float64).
``min``/``max``/``mean``/``std`` ignore NaN and ±Inf, which are counted in ``nan``/``inf`` instead;
``std`` is the unbiased (n-1) standard deviation and is None with fewer than two finite values.
Complex tensors: statistics of the magnitude ``|z|`` (``of == "|z|"``); NaN/Inf counted on ``|z|``.
Quantized tensors are dequantized first. Returns None, with no computation at all, for meta and fake
tensors (no data), sparse and nested tensors (implicit zeros / ragged values would give misleading numbers)
and DTensors (the global values live on other ranks; reading them needs a collective).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["TensorStats", "tensor_stats", "no_stats_reason"]


@dataclass(frozen=True)
class TensorStats:
    """Summary of a tensor's values; ``None`` fields mean "no finite value to summarize"."""

    min: float | None
    max: float | None
    mean: float | None
    std: float | None
    nan: int
    inf: int
    of: str = "value"


_NO_DATA_CLASSES = {"FakeTensor", "FunctionalTensor"}


def no_stats_reason(t: Any) -> str | None:
    """Usage: ``no_stats_reason(t)`` -> ``"meta"``/``"fake"``/``"sparse"``/... or None when stats are computable."""
    mro = {c.__name__ for c in type(t).__mro__}
    if mro & _NO_DATA_CLASSES:
        return "fake"
    if getattr(t, "is_meta", False):
        return "meta"
    if "DTensor" in mro:
        return "DTensor"
    if getattr(t, "is_nested", False):
        return "nested"
    if getattr(t, "is_sparse", False) or str(getattr(t, "layout", "torch.strided")) != "torch.strided":
        return "sparse"
    return None


def tensor_stats(t: Any) -> TensorStats | None:
    """Usage: ``tensor_stats(t)``; reads the tensor's data (one device sync). None where there is no data."""
    if no_stats_reason(t) is not None:
        return None
    import torch  # the tensor exists, so torch is already imported

    x = t.detach()
    if x.is_quantized:
        x = x.dequantize()
    if x.numel() == 0:
        return TensorStats(None, None, None, None, 0, 0)
    of = "value"
    wide = torch.float32 if x.device.type == "mps" else torch.float64
    if x.is_complex():
        x, of = x.abs(), "|z|"
    if x.dtype == torch.bool or not x.is_floating_point():
        x = x.to(wide)
    elif x.dtype != torch.float64:
        x = x.to(torch.float32)
    finite = torch.isfinite(x)
    count = finite.sum()
    zeros = torch.zeros((), dtype=x.dtype, device=x.device)
    total = torch.where(finite, x, zeros).sum()
    mean = total / count.clamp(min=1)
    centered = torch.where(finite, x - mean, zeros)
    var = (centered * centered).sum() / (count - 1).clamp(min=1)
    big = torch.full((), float("inf"), dtype=x.dtype, device=x.device)
    lo = torch.where(finite, x, big).amin()
    hi = torch.where(finite, x, -big).amax()
    nan = torch.isnan(x).sum()
    inf = torch.isinf(x).sum()
    parts = [lo, hi, mean, var.sqrt(), nan, inf, count]
    values = torch.stack([p.to(wide) for p in parts]).tolist()  # the one transfer
    lo, hi, mean, std, nan, inf, count = values
    n = int(count)
    return TensorStats(
        min=lo if n else None,
        max=hi if n else None,
        mean=mean if n else None,
        std=std if n >= 2 else None,
        nan=int(nan),
        inf=int(inf),
        of=of,
    )

