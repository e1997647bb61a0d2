"""`tokens` under a real llmpdb debugger with the examples' offline tokenizer: a padded batch, truncation,
the tokenizer found by type only, and clear errors."""

from __future__ import annotations

import os
import sys

import pytest
from transcript import debug_transcript, outputs_of

from llmpdb.inspect.tokens import find_tokenizers

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "examples"))
from tiny import build_tokenizer  # noqa: E402

TEXTS = ["Hello world", "Hello world, this is a tiny language model."]


@pytest.fixture(scope="module")
def tokenizer():
    tok = build_tokenizer()
    tok.pad_token = "<pad>"
    return tok


class Nosy:
    """Any attribute read is recorded: the tokenizer search must never touch it."""

    touched: list[str] = []

    def __getattr__(self, name):
        Nosy.touched.append(name)
        raise RuntimeError(f"read {name}")


def batch_stop(tokenizer, side="left", max_length=None):
    tokenizer.padding_side = side
    nosy = Nosy()
    batch = tokenizer(TEXTS, padding=True, return_tensors="pt")
    if max_length:
        tokenizer.model_max_length = max_length
    breakpoint()
    return batch, nosy


def test_tokens_on_a_left_padded_batch(tokenizer):
    chunks = outputs_of(debug_transcript(batch_stop, ["c", "tokens", "c"], tokenizer, width=100))
    lines = chunks[0].splitlines()
    assert lines[0] == "tokenizer: padding_side left · pad id 3 · special: <unk> 0, <s> 1, </s> 2, <pad> 3"
    assert lines[1] == "row 0: 25 tokens, 7 attended, 18 padding on the left"
    assert lines[2].split() == ["pos", "id", "token", "text", "note"]
    assert lines[3].split() == ["0-17", "3", "<pad>", "pad", "×18"]
    assert lines[4].split() == ["18", "1", "<s>", "'<s>'", "special"]
    assert lines[7].split() == ["21", "326", "Ġw", "'", "w'"]
    assert "row 1: 25 tokens, 25 attended" in lines
    assert "warning" not in chunks[0]
    # (other stop notes may read attributes of locals; the tokenizer and ids search reads none)
    assert not set(Nosy.touched) & {"tokenizer", "input_ids", "data", "convert_ids_to_tokens", "padding_side"}


def test_tokens_right_padding_one_row_and_truncation_warning(tokenizer):
    chunks = outputs_of(debug_transcript(batch_stop, ["c", "tokens batch --row 0", "tokens batch --row 1", "c"],
                                         tokenizer, "right", 25, width=100))
    tokenizer.model_max_length = 10**30
    row0 = chunks[0].splitlines()
    assert row0[1] == "row 0: 25 tokens, 7 attended, 18 padding on the right"
    assert row0[-2].split() == ["7-24", "3", "<pad>", "pad", "×18"]
    assert "row 1" not in chunks[0]
    assert chunks[1].splitlines()[-1] == ("warning: length 25 = tokenizer.model_max_length: the input was probably "
                                          "truncated")


def test_tokens_errors(tokenizer):
    def two_tokenizers(tok):
        other = build_tokenizer()
        ids = [1, 380]
        breakpoint()
        return other, ids

    chunks = outputs_of(debug_transcript(two_tokenizers, ["c", "tokens ids", "tokens ids --tokenizer tok",
                                                          "tokens ids --tokenizer ids", "tokens 3 --tokenizer tok",
                                                          "tokens ids --row 2 --tokenizer tok", "c"], tokenizer))
    assert chunks[0] == ("*** tokens: several tokenizers in sight: tok (TokenizersBackend), other (TokenizersBackend); "
                         "pick one with --tokenizer NAME")
    assert chunks[1].splitlines()[1] == "row 0: 2 tokens, 2 attended"
    assert chunks[2] == "*** tokens: ids is a list, not a transformers tokenizer"
    assert chunks[3] == "*** tokens: cannot read token ids from a int"
    assert chunks[4] == "*** tokens: --row 2: the batch has 1 rows"


def test_find_tokenizers_by_type_only(tokenizer):
    Nosy.touched.clear()
    assert find_tokenizers({"a": Nosy(), "tok": tokenizer, "again": tokenizer}) == [("tok", tokenizer)]
    assert Nosy.touched == []


def labels_stop(tokenizer):
    import torch

    labels = torch.tensor([[-100, 380, 10**6]])  # the ignore label, a real id, an id past the vocabulary
    floats = torch.tensor([1.5, 2.0])
    ids = torch.tensor([[1, 380, 82]])
    mismatch = {"input_ids": ids, "attention_mask": torch.tensor([[1]])}
    breakpoint()
    return labels, floats, mismatch


def test_labels_floats_and_a_mismatched_mask_are_told_not_guessed(tokenizer):
    chunks = outputs_of(debug_transcript(labels_stop, ["c", "tokens labels", "tokens floats", "tokens mismatch",
                                                       "c"], tokenizer, width=100))
    rows = [line.split() for line in chunks[0].splitlines()]
    vocab = len(tokenizer)
    assert rows[3][:3] == ["0", "-100", "?"] and " ".join(rows[3][3:]) == f"not a token id (vocabulary 0..{vocab - 1})"
    assert rows[4][:3] == ["1", "380", "Hell"]
    assert rows[5][:3] == ["2", "1000000", "?"]
    assert chunks[1].strip() == "*** tokens: it holds float32 values, not token ids"
    assert chunks[2].strip() == ("*** tokens: attention_mask (1 rows of [1]) does not match input_ids "
                                 "(1 rows of [3])")
