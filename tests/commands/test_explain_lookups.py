"""`explain` explains the operation that raised, found by its exact code position: a KeyError in
``batch["input_id"] + 1`` is the lookup (its keys, a close match), not the ``+``, also inside a GPT-2
output; an IndexError in ``x[0, 5] * 2`` names the dim and its size; an AttributeError is said to be no
shape operation; a comparison is a broadcast."""

from __future__ import annotations

import torch
from transcript import explained

from tiny_models import tiny_gpt2


def shift_ids(batch):
    return batch["input_id"] + 1


def test_key_error_explains_the_lookup_not_the_enclosing_add():
    batch = {"input_ids": torch.ones(1, 5, dtype=torch.long), "attention_mask": torch.ones(1, 5)}
    lines = explained(shift_ids, batch).splitlines()
    assert lines[0] == "KeyError: 'input_id'"
    assert lines[1].startswith("subscript: batch['input_id']   at test_explain_lookups.py:")
    assert lines[2].split() == ["batch", "?", "dict"]
    assert lines[-1] == ("  lookup: 'input_id' is not a key of batch (2 keys: 'input_ids', 'attention_mask'); "
                         "did you mean 'input_ids'?")
    assert not any(line.startswith("elementwise") for line in lines)


def logits_plus_one(model, ids):
    out = model(ids)
    return out["logit"] + 1


def test_key_error_in_a_transformers_output_is_explained_where_it_raised():
    model = tiny_gpt2()
    ids = torch.ones(1, 5, dtype=torch.long)
    keys = list(model(ids).keys())
    lines = explained(logits_plus_one, model, ids).splitlines()
    assert lines[0] == "KeyError: 'logit'"
    assert lines[1].startswith("subscript: ") and " in __getitem__" in lines[1]  # ModelOutput.__getitem__
    assert lines[-1].endswith(f"({len(keys)} keys: {', '.join(repr(k) for k in keys)}); did you mean 'logits'?")


def index_then_scale(x):
    return x[0, 5] * 2


def test_index_error_names_the_dim_and_its_size():
    x = torch.zeros(2, 3)
    lines = explained(index_then_scale, x).splitlines()
    assert lines[0].startswith("IndexError: index 5 is out of bounds for dimension 1")
    assert lines[1].startswith("subscript: x[0, 5]   at ")
    assert lines[-1] == "  lookup: index 5 is out of range for dim 1 of x (size 3)"


def attribute_then_add(x):
    return x.no_such_thing + x


def test_attribute_error_is_no_tensor_operation():
    lines = explained(attribute_then_add, torch.zeros(2)).splitlines()
    assert lines[0].startswith("AttributeError: ")
    assert lines[-1] == "  the failing code is x.no_such_thing (attribute): no shape operation to explain"


def config_typo(model):
    return model.config.n_embdd * 2


def test_an_attribute_error_raised_by_a_library_getattribute_explains_the_users_line():
    lines = explained(config_typo, tiny_gpt2()).splitlines()
    assert lines[0].startswith("AttributeError: ") and "n_embdd" in lines[0]
    assert lines[1].startswith("model.config.n_embdd   at test_explain_lookups.py:")  # not configuration_utils.py
    assert "raised inside configuration_utils.py:" in lines[2] and "(__getattribute__), called from here" in lines[2]
    assert lines[-1] == "  the failing code is model.config.n_embdd (attribute): no shape operation to explain"


def mask_compare(scores, lengths):
    return scores < lengths


def test_a_comparison_is_explained_as_a_broadcast():
    lines = explained(mask_compare, torch.zeros(2, 7), torch.zeros(3)).splitlines()
    assert lines[1].startswith("elementwise <: scores < lengths   at ")
    assert lines[-1] == "  mismatch: scores dim 1 (7) vs lengths dim 0 (3) (broadcast (aligned from the right))"
