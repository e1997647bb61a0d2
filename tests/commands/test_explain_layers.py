"""`explain` tells a called layer by its class (``type(m).__mro__``): an Embedding's IndexError names its
num_embeddings (never a Linear's in_features), transformers' Conv1D is ``x @ weight``, and a layer or a
function of another kind (EmbeddingBag, a user's ``linear``) gets no diagnosis rather than a wrong one."""

from __future__ import annotations

import torch
from torch import nn
from transcript import debug_transcript, outputs_of

import llmpdb
from tiny_models import tiny_gpt2


def run_post_mortem(func, *args):
    try:
        func(*args)
    except Exception:
        llmpdb.post_mortem()


def explained(func, *args, width=100):
    return outputs_of(debug_transcript(run_post_mortem, ["c", "explain", "c"], func, *args, width=width))[0]


def test_gpt2_input_longer_than_n_positions_names_the_position_embedding():
    model = tiny_gpt2()
    n_positions = model.config.n_positions
    ids = torch.ones(1, n_positions + 6, dtype=torch.long)
    text = explained(model, ids, width=200)
    lines = text.splitlines()
    assert lines[0] == "IndexError: index out of range in self"
    assert lines[1].startswith("Embedding call: self.wpe(position_ids)   at modeling_gpt2.py:")
    assert "in_features" not in text
    assert (f"  mismatch: position_ids holds an index ≥ {n_positions} or < 0: transformer.wpe (Embedding) has "
            f"num_embeddings {n_positions} (index values not read)") in lines
    assert lines[-1] == (f"  hint: position_ids counts {n_positions + 6} positions (from arange) and transformer.wpe "
                         f"(Embedding) has {n_positions}: the input is longer than the model's positions?")


def test_gpt2_token_id_past_the_vocabulary_names_the_token_embedding():
    model = tiny_gpt2()
    vocab = model.config.vocab_size
    ids = torch.tensor([[1, vocab + 3, 2]])
    text = explained(model, ids, width=200)
    assert text.splitlines()[1].startswith("Embedding call: self.wte(input_ids)")
    assert "in_features" not in text and "hint" not in text  # nothing says the input is too long
    assert (f"  mismatch: input_ids holds an index ≥ {vocab} or < 0: transformer.wte (Embedding) has "
            f"num_embeddings {vocab} (index values not read)") in text.splitlines()


def bag_call(bag, ids):
    return bag(ids)


def test_a_layer_of_another_class_gets_no_in_features_diagnosis():
    text = explained(bag_call, nn.EmbeddingBag(10, 4), torch.tensor([[1, 20, 3]]))
    assert text.splitlines()[1].startswith("EmbeddingBag call: bag(ids)")
    assert "in_features" not in text
    assert text.splitlines()[-1] == "  mismatch: none found in the shapes (the error is about something else?)"


def linear(x, w):
    """A user's function named like F.linear, with the other convention (x @ w)."""
    return x @ w


def at_a_stop(model):
    attn = model.transformer.h[0].attn
    x = torch.zeros(1, 3, 16)
    x2, w = torch.zeros(2, 3), torch.zeros(3, 4)
    breakpoint()
    return attn, x, x2, w


def test_conv1d_and_a_users_linear_are_told_by_their_class():
    model = tiny_gpt2()
    n_embd = model.config.n_embd
    out = outputs_of(debug_transcript(at_a_stop, ["c", "explain attn.c_attn(x)", "explain linear(x2, w)", "c"], model,
                                      width=200))
    conv = out[0].splitlines()
    assert conv[0].startswith("Conv1D call: attn.c_attn(x)")
    assert (f"  mismatch: x dim 2 (16) vs attn.c_attn.weight dim 0 ({n_embd}) (input's last dim vs the weight's "
            "rows (Conv1D: x @ weight))") in conv
    assert conv[-1] == (f"  hint: attn.c_attn (Conv1D) expects {n_embd} input features (Conv1D "
                        "weight is (in, out)); the input's last dim is 16")
    user = out[1]
    assert user.splitlines()[0].startswith("linear: linear(x2, w)")
    assert "mismatch" not in user and "in_features" not in user
