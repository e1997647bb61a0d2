"""The one home of sizes in text: bytes, counts, shapes, plurals.

Usage::

    human_bytes(18432)        # "18.0 KiB"       human_bytes(448) -> "448 B"
    mib(3 * 2**20)            # "3.0 MiB"        (fixed unit, for budgets and free memory)
    human_count(106816)       # "106.8K"
    format_number(0.0123456)  # "0.0123"
    format_shape((7,))        # "(7,)"           format_shape((1, 7)) -> "(1, 7)"
    plural(3, "layer")        # "3 layers"

A leaf module with no imports of its own: inspection writes notes and error lines that carry sizes, and
rendering writes tables; both use these (render may import inspect, never the reverse, so the shared
formatters live below both).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["human_bytes", "mib", "human_count", "format_number", "format_shape", "plural"]


def human_bytes(n: int) -> str:
    """Usage: ``human_bytes(18432)`` -> ``"18.0 KiB"``; ``human_bytes(448)`` -> ``"448 B"``."""
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}"
    return f"{n} B"


def mib(n: int, digits: int = 1) -> str:
    """Usage: ``mib(3 * 2**20)`` -> ``"3.0 MiB"``; ``mib(n, 0)`` -> ``"3 MiB"``."""
    return f"{n / 2**20:.{digits}f} MiB"


def human_count(n: int) -> str:
    """Usage: ``human_count(106816)`` -> ``"106.8K"``; ``human_count(7_000_000_000)`` -> ``"7.0B"``."""
    for scale, unit in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return str(n)


def format_number(value: float | int | None) -> str:
    """Usage: ``format_number(0.0123456)`` -> ``"0.0123"``; integers stay exact below 1e6; None -> ``-``."""
    if value is None:
        return "-"
    if float(value).is_integer() and abs(value) < 1e6:
        return str(int(value))
    return f"{value:.3g}"


def format_shape(shape: Sequence[int | str]) -> str:
    """Usage: ``format_shape((7,))`` -> ``"(7,)"``; ``format_shape((1, 7))`` -> ``"(1, 7)"``."""
    inner = ", ".join(str(s) for s in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


def plural(n: int, word: str, many: str | None = None) -> str:
    """Usage: ``plural(1, "stop")`` -> ``"1 stop"``; ``plural(2, "cache")`` -> ``"2 caches"``."""
    return f"{n} {word if n == 1 else (many or word + 's')}"
