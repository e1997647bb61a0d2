"""Where ``scaled_dot_product_attention`` and ``einsum`` operands disagree, from their shapes alone.

Usage::

    sdpa_mismatch((1, 4, 7, 16), (1, 2, 7, 16), (1, 2, 7, 16))     # Mismatch(0, 1, 1, 1, 4, 2, ...): heads
    sdpa_mismatch(q, k, v, mask=(1, 1, 7, 5))                       # the mask's last dim (5) vs key seq (7)
    einsum_mismatch("bhqd,bhkd->bhqk", [(1, 4, 7, 16), (1, 2, 7, 16)])
    # Mismatch(0, 1, 1, 1, 4, 2, "both are 'h' in 'bhqd,bhkd->bhqk'")
    einsum_mismatch("ij,jk", [(2, 3), (3, 4, 5)])                  # "operand 1 has 3 dims, 'jk' names 2 ..."

Pure arithmetic on tuples of ints, the rules of the torch docs: query (…, L, E), key (…, S, E), value
(…, S, Ev), a mask broadcast to (…, L, S); einsum's same subscript must have one size (or 1). ``None``
when nothing disagrees or an argument is not known.
"""

from __future__ import annotations

from .shape_ops import Mismatch, broadcast_mismatch

__all__ = ["sdpa_mismatch", "einsum_mismatch"]


def _batch(a: tuple[int, ...], b: tuple[int, ...], ia: int, ib: int, rule: str, gqa: bool) -> Mismatch | None:
    """The first pair of batch dims (all but the last two, from the right) that do not broadcast."""
    for k in range(3, min(len(a), len(b)) + 1):
        sa, sb = a[-k], b[-k]
        if sa == sb or 1 in (sa, sb) or (gqa and k == 3 and sb and sa % sb == 0):
            continue
        return Mismatch(ia, len(a) - k, ib, len(b) - k, sa, sb, rule)
    return None


def sdpa_mismatch(q, k, v, mask=None, *, gqa: bool = False) -> Mismatch | None:
    """Usage: ``sdpa_mismatch(q_shape, k_shape, v_shape, mask_shape)``; operands 0..3 are q, k, v, mask;
    ``gqa``: ``enable_gqa=True`` (query heads a multiple of key heads)."""
    if any(s is not None and len(s) < 2 for s in (q, k, v)) or None in (q, k, v):
        return None
    if q[-1] != k[-1]:
        return Mismatch(0, len(q) - 1, 1, len(k) - 1, q[-1], k[-1], "query and key must share the last dim, E")
    if k[-2] != v[-2]:
        return Mismatch(1, len(k) - 2, 2, len(v) - 2, k[-2], v[-2], "key and value must share the seq dim, S")
    found = _batch(q, k, 0, 1, "query and key batch/heads dims broadcast", gqa) or \
        _batch(k, v, 1, 2, "key and value batch/heads dims broadcast", False)
    if found is not None or mask is None:
        return found
    scores = (*q[:-1], k[-2])  # (…, L, S)
    m = broadcast_mismatch([mask, scores])
    if m is None:
        return None
    rule = "the mask broadcasts to (…, L, S): query's L, key's S"
    if m.dim_b == len(scores) - 1:
        return Mismatch(3, m.dim_a, 1, len(k) - 2, m.size_a, m.size_b, rule)
    return Mismatch(3, m.dim_a, 0, m.dim_b, m.size_a, m.size_b, rule)


def _terms(equation: str) -> list[str] | None:
    lhs = equation.replace(" ", "").split("->")[0]
    terms = lhs.split(",")
    ok = all(t.replace("...", "").isalpha() and t.count("...") <= 1 for t in terms if t)
    return terms if ok else None


def einsum_mismatch(equation: str, shapes: list[tuple[int, ...]],
                    names: list[str] | None = None) -> Mismatch | str | None:
    """Usage: ``einsum_mismatch("bij,bjk->bik", [a_shape, b_shape], ["a", "b"])``; the first subscript whose
    sizes disagree between two operands (a Mismatch), a message when the equation does not fit them."""
    terms = _terms(equation)
    if terms is None:
        return None
    if len(terms) != len(shapes):
        return f"'{equation}' names {len(terms)} operand(s), {len(shapes)} given"
    seen: dict[str, tuple[int, int, int]] = {}
    spans: list[tuple[int, int]] = []  # (operand, first dim) of each operand's "..." dims
    for i, (term, shape) in enumerate(zip(terms, shapes)):
        letters = term.replace("...", "")
        if "..." not in term and len(letters) != len(shape) or len(letters) > len(shape):
            what = names[i] if names and i < len(names) else f"operand {i}"
            return f"{what} has {len(shape)} dims {shape}, '{term}' of '{equation}' names {len(letters)}"
        at = term.find("...")
        dims = list(range(len(letters))) if at < 0 else \
            list(range(at)) + list(range(len(shape) - (len(letters) - at), len(shape)))
        if at >= 0:
            spans.append((i, at))
        for letter, dim in zip(letters, dims):
            size = shape[dim]
            if letter not in seen or seen[letter][2] == 1:
                seen[letter] = (i, dim, size)
                continue
            j, other_dim, other = seen[letter]
            if size not in (other, 1):
                return Mismatch(j, other_dim, i, dim, other, size, f"both are '{letter}' in '{equation}'")
    return _ellipsis_mismatch(equation, terms, shapes, spans)


def _ellipsis_mismatch(equation, terms, shapes, spans) -> Mismatch | None:
    """The "..." dims of the operands broadcast together (aligned from the right)."""
    parts = []
    for i, at in spans:
        count = len(shapes[i]) - len(terms[i].replace("...", ""))
        parts.append((i, at, shapes[i][at:at + count]))
    if len(parts) < 2:
        return None
    m = broadcast_mismatch([p[2] for p in parts])
    if m is None:
        return None
    (ia, at_a, _), (ib, at_b, _) = parts[m.a], parts[m.b]
    rule = f"the '...' dims of '{equation}' broadcast"
    return Mismatch(ia, at_a + m.dim_a, ib, at_b + m.dim_b, m.size_a, m.size_b, rule)
