"""Shapes computed without running anything: tensor-method results and the mismatch an operation trips on.

Usage::

    apply_method((1, 2, 7, 16), "transpose", (2, 3))     # (1, 2, 16, 7)
    permute_of("transpose", (2, 3), 4)                   # [0, 1, 3, 2]: where each result dim comes from
    matmul_mismatch((1, 4, 7, 16), (1, 2, 16, 7))        # Mismatch(0, 1, 1, 4, 2, "batch dims broadcast")
    broadcast_mismatch([(64,), (1, 3, 48)])              # Mismatch(0, 0, 1, 64, 48, ...)
    cat_mismatch([(1, 4, 7), (1, 2, 7)], dim=2)          # dim 1 differs
    view_mismatch((1, 7, 64), (1, 7, -1, 24))            # numel 448 is not divisible by 168

Pure arithmetic on tuples of ints: ``None`` wherever a shape or an argument is not known.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Mismatch", "SAME_SHAPE", "SHAPE_METHODS", "apply_method", "index_shape", "permute_of", "matmul_mismatch",
           "broadcast_mismatch", "cat_mismatch", "view_mismatch", "linear_mismatch"]

# Tensor methods whose result has the receiver's shape (dtype/device/layout changes).
SAME_SHAPE = frozenset({
    "contiguous", "float", "half", "bfloat16", "double", "int", "long", "bool", "to", "type_as", "clone",
    "detach", "cpu", "cuda", "requires_grad_", "type", "softmax", "log_softmax", "masked_fill", "relu",
    "sigmoid", "tanh", "exp", "neg", "abs", "sqrt", "rsqrt",
})
# Tensor methods that change the shape in a way computed here.
SHAPE_METHODS = frozenset({"transpose", "swapaxes", "permute", "unsqueeze", "squeeze", "view", "reshape",
                           "expand", "flatten", "T", "mT"})


@dataclass(frozen=True)
class Mismatch:
    """Operand ``a``'s dim ``dim_a`` (size ``size_a``) against operand ``b``'s ``dim_b`` (``size_b``)."""

    a: int
    dim_a: int
    b: int
    dim_b: int
    size_a: int
    size_b: int
    rule: str


def _norm(dim: int, rank: int) -> int | None:
    if not isinstance(dim, int) or isinstance(dim, bool):
        return None
    dim = dim + rank if dim < 0 else dim
    return dim if 0 <= dim < rank else None


def _ints(args) -> tuple[int, ...] | None:
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    if all(isinstance(a, int) and not isinstance(a, bool) for a in args):
        return tuple(args)
    return None


def permute_of(method: str, args: tuple, rank: int) -> list[int] | None:
    """Usage: ``permute_of("transpose", (1, 2), 4)`` -> ``[0, 2, 1, 3]``; None for other methods."""
    order = list(range(rank))
    if method in ("transpose", "swapaxes") and len(args) == 2:
        a, b = _norm(args[0], rank), _norm(args[1], rank)
        if a is None or b is None:
            return None
        order[a], order[b] = order[b], order[a]
        return order
    if method == "mT" and rank >= 2:
        order[-1], order[-2] = order[-2], order[-1]
        return order
    if method == "T":
        return order[::-1]
    if method == "permute":
        dims = _ints(args)
        if dims is None or len(dims) != rank:
            return None
        normed = [_norm(d, rank) for d in dims]
        return None if None in normed or sorted(normed) != order else normed
    return None


def _view(shape: tuple[int, ...], new: tuple[int, ...]) -> tuple[int, ...] | None:
    if list(new).count(-1) > 1 or any(d < -1 for d in new):
        return None
    numel = math.prod(shape)
    known = math.prod(d for d in new if d != -1)
    if -1 in new:
        if known == 0 or numel % known:
            return None
        return tuple(numel // known if d == -1 else d for d in new)
    return new if known == numel else None


def apply_method(shape: tuple[int, ...] | None, method: str, args: tuple = ()) -> tuple[int, ...] | None:
    """Usage: ``apply_method((2, 3), "unsqueeze", (0,))`` -> ``(1, 2, 3)``; None when it cannot be told."""
    if shape is None:
        return None
    rank = len(shape)
    if method in SAME_SHAPE:
        return shape
    if method == "[]":
        return index_shape(shape, args)
    order = permute_of(method, args, rank)
    if order is not None:
        return tuple(shape[i] for i in order)
    if method == "unsqueeze" and len(args) == 1:
        d = _norm(args[0], rank + 1)
        return None if d is None else shape[:d] + (1,) + shape[d:]
    if method == "squeeze":
        if not args:
            return tuple(s for s in shape if s != 1)
        d = _norm(args[0], rank) if len(args) == 1 else None
        return None if d is None else (shape[:d] + shape[d + 1:] if shape[d] == 1 else shape)
    if method in ("view", "reshape"):
        new = _ints(args)
        return None if new is None else _view(shape, new)
    if method == "expand":
        new = _ints(args)
        if new is None or len(new) < rank:
            return None
        lead = len(new) - rank
        out = list(new[:lead])
        for size, want in zip(shape, new[lead:]):
            if want != -1 and size != 1 and want != size:
                return None
            out.append(size if want == -1 else want)
        return tuple(out)
    if method == "flatten":
        start = args[0] if len(args) >= 1 else 0
        end = args[1] if len(args) >= 2 else -1
        s, e = _norm(start, rank), _norm(end, rank)
        if s is None or e is None or s > e:
            return None
        return shape[:s] + (math.prod(shape[s:e + 1]),) + shape[e + 1:]
    return None


def index_shape(shape: tuple[int, ...], keys: tuple) -> tuple[int, ...] | None:
    """Usage: ``index_shape((2, 3, 4), (0, slice(None, 2)))`` -> ``(2, 4)``; keys are ints, slices, None
    (a new axis) and one Ellipsis; None for anything else (a tensor index, a bool mask)."""
    if sum(k is Ellipsis for k in keys) > 1:
        return None
    used = sum(1 for k in keys if k is not None and k is not Ellipsis)
    if used > len(shape):
        return None
    if Ellipsis in [k for k in keys if k is Ellipsis]:
        at = next(i for i, k in enumerate(keys) if k is Ellipsis)
        keys = keys[:at] + (slice(None),) * (len(shape) - used) + keys[at + 1:]
    out, dim = [], 0
    for key in keys:
        if key is None:
            out.append(1)
        elif type(key) is int:
            if not -shape[dim] <= key < shape[dim]:
                return None
            dim += 1
        elif type(key) is slice:
            out.append(len(range(*key.indices(shape[dim]))))
            dim += 1
        else:
            return None
    return tuple(out) + tuple(shape[dim:])


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, int] | None:
    """The first pair of dims (from the right) that cannot broadcast, as indices into ``a`` and ``b``."""
    for k in range(1, min(len(a), len(b)) + 1):
        sa, sb = a[-k], b[-k]
        if sa != sb and sa != 1 and sb != 1:
            return len(a) - k, len(b) - k
    return None


def matmul_mismatch(a: tuple[int, ...], b: tuple[int, ...]) -> Mismatch | None:
    """Usage: ``matmul_mismatch((2, 3), (4, 5))`` -> dim 1 of a (3) against dim 0 of b (4)."""
    if not a or not b:
        return None
    ka = len(a) - 1
    kb = 0 if len(b) == 1 else len(b) - 2
    if a[ka] != b[kb]:
        return Mismatch(0, ka, 1, kb, a[ka], b[kb], "contracted dims (last of a, second-to-last of b)")
    if len(a) > 2 and len(b) > 2:
        found = _broadcast(a[:-2], b[:-2])
        if found is not None:
            i, j = found
            return Mismatch(0, i, 1, j, a[i], b[j], "batch dims broadcast (aligned from the right)")
    return None


def broadcast_mismatch(shapes: list[tuple[int, ...]]) -> Mismatch | None:
    """Usage: ``broadcast_mismatch([(4, 3), (2, 3)])``; the first pair of operands that cannot broadcast."""
    for i in range(len(shapes)):
        for j in range(i + 1, len(shapes)):
            found = _broadcast(shapes[i], shapes[j])
            if found is not None:
                return Mismatch(i, found[0], j, found[1], shapes[i][found[0]], shapes[j][found[1]],
                                "broadcast (aligned from the right)")
    return None


def cat_mismatch(shapes: list[tuple[int, ...]], dim: int) -> Mismatch | str | None:
    """Usage: ``cat_mismatch([(1, 4, 7), (1, 2, 7)], 2)``; every dim but ``dim`` must agree (a str for ranks)."""
    if not shapes:
        return None
    first = shapes[0]
    for j, other in enumerate(shapes[1:], start=1):
        if len(other) != len(first):
            return f"operand 1 has {len(first)} dims, operand {j + 1} has {len(other)}"
        d = _norm(dim, len(first))
        for k, (sa, sb) in enumerate(zip(first, other)):
            if k != d and sa != sb:
                return Mismatch(0, k, j, k, sa, sb, f"every dim but the cat dim ({dim}) must match")
    return None


def view_mismatch(shape: tuple[int, ...], new: tuple[int, ...]) -> str | None:
    """Usage: ``view_mismatch((1, 7, 64), (1, 7, 3, 16))`` -> ``'448 elements do not fit (1, 7, 3, 16) = 336'``."""
    numel = math.prod(shape)
    if list(new).count(-1) > 1:
        return f"only one dimension may be -1 in {tuple(new)}"
    known = math.prod(d for d in new if d != -1)
    if -1 in new:
        if known == 0 or numel % known:
            return f"{numel} elements are not divisible by {known} (the product of {tuple(new)} without -1)"
        return None
    return None if known == numel else f"{numel} elements do not fit {tuple(new)} = {known}"


def linear_mismatch(x: tuple[int, ...], weight: tuple[int, ...]) -> Mismatch | None:
    """Usage: ``linear_mismatch((2, 16), (8, 32))``; the input's last dim against the weight's in_features."""
    if not x or len(weight) != 2 or x[-1] == weight[1]:
        return None
    return Mismatch(0, len(x) - 1, 1, 1, x[-1], weight[1], "input's last dim vs the weight's in_features")
