"""Token ids made readable: the tokenizer in sight (found by type), each id decoded, padding, specials.

Usage::

    found = find_tokenizers(frame_locals(frame), frame.f_globals)   # [("tokenizer", tok)] by MRO names
    ids, mask = split_inputs(inputs)          # a BatchEncoding / dict / tensor / list -> rows of ids, mask
    report = token_report(tok, ids, mask)     # TokenReport: one SequenceReport per row

A tokenizer is recognised by ``type(obj).__mro__`` names only (``PreTrainedTokenizerBase``), a processor
(``ProcessorMixin``) by its stored ``tokenizer`` attribute: no property of an unknown object runs. Once
found, the tokenizer's own API decodes (``convert_ids_to_tokens``, ``decode``). Ids are read (the user
asked to see them); nothing is written.
"""

from __future__ import annotations

from collections import UserDict
from dataclasses import dataclass, field
from typing import Any

from .kinds import MISSING, class_names, static_attr
from .safe import is_tensor, safe_getattr

__all__ = ["TokenRow", "SequenceReport", "TokenReport", "find_tokenizers", "find_inputs", "split_inputs",
           "token_report", "is_tokenizer"]

_TOKENIZER_BASES = ("PreTrainedTokenizerBase",)
_PROCESSOR_BASES = ("ProcessorMixin",)


def is_tokenizer(obj: Any) -> bool:
    """Usage: ``is_tokenizer(x)``; a transformers tokenizer, told by its class names (no attribute read)."""
    return not isinstance(obj, type) and any(n in _TOKENIZER_BASES for n in class_names(obj))


def find_tokenizers(*namespaces) -> list[tuple[str, Any]]:
    """``[(name, tokenizer)]`` in the namespaces, in order, each tokenizer once; processors looked into."""
    found: list[tuple[str, Any]] = []
    for namespace in namespaces:
        for name, value in list(namespace.items()):
            if str(name).startswith("__"):
                continue
            candidate, label = value, str(name)
            if not is_tokenizer(value) and any(n in _PROCESSOR_BASES for n in class_names(value)):
                candidate, label = static_attr(value, "tokenizer", None), f"{name}.tokenizer"
            if is_tokenizer(candidate) and all(candidate is not t for _, t in found):
                found.append((label, candidate))
    return found


def _mapping(value: Any) -> dict | None:
    if issubclass(type(value), dict):
        return dict(dict.items(value))
    if issubclass(type(value), UserDict):
        data = static_attr(value, "data", MISSING)
        return dict(data) if isinstance(data, dict) else None
    return None


def find_inputs(namespace) -> tuple[str, Any] | None:
    """``("inputs", batch)`` or ``("input_ids", tensor)``: the ids in sight (``input_ids`` first)."""
    items = list(namespace.items())
    for name, value in items:
        if name == "input_ids" and is_tensor(value):
            return name, value
    for name, value in items:
        mapping = _mapping(value)
        if mapping is not None and is_tensor(mapping.get("input_ids")):
            return str(name), value
    return None


def _rows(value: Any) -> list[list[int]]:
    if is_tensor(value):
        if value.dtype.is_floating_point or value.dtype.is_complex:
            raise ValueError(f"it holds {str(value.dtype).replace('torch.', '')} values, not token ids")
        if value.dim() == 1:
            return [[int(v) for v in value.tolist()]]
        if value.dim() == 2:
            return [[int(v) for v in row] for row in value.tolist()]
        raise ValueError(f"input_ids has {value.dim()} dimensions (1 or 2 expected)")
    if isinstance(value, (list, tuple)) and value and all(type(v) is int for v in value):
        return [list(value)]
    if (isinstance(value, (list, tuple)) and value and all(isinstance(r, (list, tuple)) for r in value)
            and all(type(v) is int for r in value for v in r)):
        return [list(r) for r in value]
    raise ValueError(f"cannot read token ids from a {type(value).__name__}")


def split_inputs(value: Any) -> tuple[list[list[int]], list[list[int]] | None]:
    """Usage: ``split_inputs(batch)`` -> ``(ids rows, attention-mask rows or None)``; raises ValueError."""
    mapping = _mapping(value)
    if mapping is not None:
        if "input_ids" not in mapping:
            raise ValueError("no 'input_ids' in it")
        mask = mapping.get("attention_mask")
        ids, mask_rows = _rows(mapping["input_ids"]), (_rows(mask) if mask is not None else None)
        if mask_rows is not None and [len(r) for r in mask_rows] != [len(r) for r in ids]:
            raise ValueError(f"attention_mask ({len(mask_rows)} rows of {sorted({len(r) for r in mask_rows})}) "
                             f"does not match input_ids ({len(ids)} rows of {sorted({len(r) for r in ids})})")
        return ids, mask_rows
    return _rows(value), None


@dataclass(frozen=True)
class TokenRow:
    """One position (or ``count`` equal consecutive padding positions from ``pos``)."""

    pos: int
    id: int
    token: str
    text: str
    note: str = ""
    count: int = 1


@dataclass
class SequenceReport:
    row: int
    length: int
    attended: int
    pad_positions: list[int]
    pad_side: str                      # "left", "right", "both", "inside" or "" (no padding)
    tokens: list[TokenRow] = field(default_factory=list)


@dataclass
class TokenReport:
    sequences: list[SequenceReport]
    padding_side: str | None
    pad_id: int | None
    special: dict[int, str]
    max_length: int | None
    rows_total: int


def _side(pads: list[int], length: int) -> str:
    """Where the padding sits: all at the start, all at the end, both ends, or inside the sequence."""
    if not pads:
        return ""
    pad = set(pads)
    lead = next((i for i in range(length) if i not in pad), length)
    tail = next((i for i in range(length) if length - 1 - i not in pad), length)
    if lead == len(pad):
        return "left"
    if tail == len(pad):
        return "right"
    return "both" if lead + tail == len(pad) else "inside"


def _vocab_size(tokenizer) -> int | None:
    try:  # the tokenizer's own __len__ (a transformers class, found by type): vocabulary plus added tokens
        size = len(tokenizer)
    except Exception:  # a tokenizer without a length: every id is passed on to it
        return None
    return size if type(size) is int and size > 0 else None


def _sequence(tokenizer, row: int, ids: list[int], mask: list[int] | None, special: dict[int, str],
              pad_id: int | None) -> SequenceReport:
    vocab = _vocab_size(tokenizer)
    valid = [vocab is None or 0 <= t < vocab for t in ids]
    known = iter(tokenizer.convert_ids_to_tokens([t for t, ok in zip(ids, valid) if ok]))
    pieces = [next(known) if ok else None for ok in valid]
    if mask:
        pads = [i for i, m in enumerate(mask) if not m]
    else:  # no attention mask: the pad id marks the padding
        pads = [i for i, t in enumerate(ids) if t == pad_id]
    report = SequenceReport(row, len(ids), len(ids) - len(pads), pads, _side(pads, len(ids)))
    padset = set(pads)
    for pos, (tid, piece) in enumerate(zip(ids, pieces)):
        if piece is None:  # -100 (the ignore label) or an id past the vocabulary: no token to show
            report.tokens.append(TokenRow(pos, tid, "?", "", f"not a token id (vocabulary 0..{vocab - 1})"))
            continue
        if pos in padset:
            note = "pad"
        elif tid == pad_id:
            note = "pad id, attended"
        elif tid in special:
            note = "special"
        else:
            note = ""
        last = report.tokens[-1] if report.tokens else None
        if note == "pad" and last is not None and last.note == "pad" and last.id == tid \
                and last.pos + last.count == pos:
            report.tokens[-1] = TokenRow(last.pos, tid, last.token, last.text, "pad", last.count + 1)
            continue
        text = tokenizer.decode([tid]) if note != "pad" else ""
        report.tokens.append(TokenRow(pos, tid, str(piece), text, note))
    return report


def token_report(tokenizer, ids: list[list[int]], mask: list[list[int]] | None = None, *,
                 rows: list[int] | None = None) -> TokenReport:
    """Usage: ``token_report(tok, [[1, 380, 82]], [[1, 1, 1]])``; ``rows`` picks batch rows (default all)."""
    special_ids = list(safe_getattr(tokenizer, "all_special_ids", []) or [])
    special_tokens = tokenizer.convert_ids_to_tokens(special_ids) if special_ids else []
    special = dict(zip(special_ids, special_tokens))
    pad_id = safe_getattr(tokenizer, "pad_token_id", None)
    max_length = safe_getattr(tokenizer, "model_max_length", None)
    picked = rows if rows is not None else list(range(len(ids)))
    sequences = [_sequence(tokenizer, r, ids[r], mask[r] if mask else None, special, pad_id) for r in picked]
    side = safe_getattr(tokenizer, "padding_side", None)
    unlimited = not isinstance(max_length, int) or max_length >= 10**12  # transformers' "no limit" sentinel
    return TokenReport(sequences, side if isinstance(side, str) else None, pad_id, special,
                       None if unlimited else max_length, len(ids))
