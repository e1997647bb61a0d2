"""Dimension naming (llmpdb.inspect.dims) and config lookup (llmpdb.inspect.config) on real tiny configs."""

from __future__ import annotations

import types

import torch

from llmpdb.inspect.config import config_candidates, find_config, locate_config, looks_like_config
from llmpdb.inspect.dims import DimNamer, config_sizes, frame_batch_seq
from tiny_models import plain_model, tiny_gpt2, tiny_llama, tiny_t5

IDS = torch.zeros(1, 7, dtype=torch.long)


class Hostile:
    def __getattr__(self, name):
        raise RuntimeError(f"no {name}")


def describe_all(namer, shapes):
    return {shape: namer.describe(shape) for shape in shapes}


def test_llama_gqa_attention_shapes():
    model = tiny_llama()
    namer = DimNamer.from_frame({"self": model.model.layers[0].self_attn, "hidden_states": torch.zeros(1, 7, 64)})
    assert namer.source == "self.config (LlamaConfig), batch/seq from hidden_states"
    assert describe_all(namer, [(1, 4, 7, 16), (1, 2, 7, 16), (1, 7, 64), (1, 7, 32), (1, 7, 128), (1, 7, 256)]) == {
        (1, 4, 7, 16): "batch · heads · seq · head_dim",
        (1, 2, 7, 16): "batch · kv_heads · seq · head_dim",
        (1, 7, 64): "batch · seq · hidden",
        (1, 7, 32): "batch · seq · kv_dim",
        (1, 7, 128): "batch · seq · intermediate",
        (1, 7, 256): "batch · seq · vocab",
    }
    assert namer.name_dims((1, 4, 7, 7)) == ["batch", "heads", "seq", "seq"]
    assert namer.layers == 2


def test_size_one_is_never_guessed_beyond_leading_batch():
    namer = DimNamer.from_config(tiny_llama().config, batch=1, seq=1)
    assert namer.describe((1, 4, 1, 16)) == "batch · heads · 1 · head_dim"   # decode step: seq=1
    assert namer.describe((1, 1, 7, 7)) == "batch · 1 · ? · ?"               # broadcast mask dimension
    assert namer.describe((1,)) == ""                                        # nothing known: no names
    two = DimNamer.from_config(tiny_llama().config, batch=2, seq=5)
    assert two.describe((1, 1, 5, 5)) == "1 · 1 · seq · seq"


def test_shared_sizes_print_a_question_mark_and_the_leading_dimension_is_the_batch():
    # head_dim 16 and seq 16; batch 2 and kv_heads 2: by size, a shared size names nothing
    namer = DimNamer.from_config(tiny_llama().config, batch=2, seq=16)
    assert namer.describe((2, 2, 16, 16)) == "batch · kv_heads · ? · ?"
    assert namer.describe((2, 3, 99)) == "batch · ? · ?"
    # batch-first: "batch" is never offered for a later dimension, nor for a 1-d tensor, and the
    # leading dimension of a batched tensor gets no other name
    assert namer.describe((16, 2), batched=False) == "? · kv_heads"
    short = DimNamer.from_config(tiny_llama().config, batch=2, seq=5)
    assert short.describe((5, 64), batched=False) == "? · hidden"       # a weight's 5 is never seq
    assert short.describe((2, 5)) == "batch · seq"
    assert namer.describe((32, 64)) == "tokens · hidden"                       # batch × seq rows
    assert DimNamer.from_config(None, batch=3, seq=5).describe((5, 3)) == ""
    assert DimNamer.from_config(None, batch=3, seq=5).describe((3,)) == ""


def test_mha_config_has_no_kv_heads_name():
    sizes = config_sizes(tiny_llama(num_key_value_heads=4).config)
    assert "kv_heads" not in sizes and "kv_dim" not in sizes and sizes["heads"] == 4


def test_gpt2_config_spellings():
    config = tiny_gpt2().config
    assert config_sizes(config) == {"hidden": 32, "heads": 4, "head_dim": 8, "vocab": 256,
                                    "intermediate": 128, "layers": 2}
    namer = DimNamer.from_frame({"model": tiny_gpt2(), "input_ids": torch.zeros(2, 5, dtype=torch.long)})
    assert namer.describe((2, 4, 5, 8)) == "batch · heads · seq · head_dim"
    assert namer.describe((2, 5, 128)) == "batch · seq · intermediate"


def test_t5_config_spellings():
    sizes = config_sizes(tiny_t5().config)
    assert sizes == {"hidden": 32, "heads": 4, "head_dim": 8, "vocab": 256, "intermediate": 64, "layers": 2}
    namer = DimNamer.from_config(tiny_t5().config, batch=3, seq=5)
    assert namer.describe((3, 4, 5, 8)) == "batch · heads · seq · head_dim"
    assert namer.describe((3, 5, 32)) == "batch · seq · hidden"


def test_frame_without_config_names_batch_and_seq_only():
    from transformers import BatchEncoding

    inputs = BatchEncoding({"input_ids": torch.zeros(3, 9, dtype=torch.long)})
    namer = DimNamer.from_frame({"inputs": inputs, "model": plain_model()})
    assert namer.source == "batch/seq from inputs['input_ids']"
    assert namer.describe((3, 9, 64)) == "batch · seq · ?"
    assert DimNamer.from_frame({"x": torch.zeros(3)}) is None


def test_frame_batch_seq_sources_and_priorities():
    assert frame_batch_seq({"attention_mask": torch.ones(2, 9), "input_ids": torch.ones(2, 1)}) == (2, 1, "input_ids")
    assert frame_batch_seq({"hidden_states": torch.ones(2, 6, 64)}, hidden=64) == (2, 6, "hidden_states")
    assert frame_batch_seq({"hidden_states": torch.ones(2, 6, 65)}, hidden=64) is None
    assert frame_batch_seq({"input_ids": [[1, 2]], "labels": torch.ones(4, 3)}) == (4, 3, "labels")
    kwargs = {"position_ids": torch.arange(5)[None]}
    assert frame_batch_seq({"kwargs": kwargs, "query": torch.ones(2, 4, 5, 8)}) == (None, 5, "kwargs['position_ids']")
    assert frame_batch_seq({"cache_position": torch.arange(3)}) == (None, 3, "cache_position")
    namer = DimNamer.from_frame({"module": tiny_llama().model.layers[0].self_attn, "kwargs": kwargs})
    assert namer.source == "module.config (LlamaConfig), seq from kwargs['position_ids']"
    # batch unknown: the leading dimension is the batch, never "kv_heads" although the size matches
    assert namer.describe((2, 4, 5, 16)) == "? · heads · seq · head_dim"
    assert namer.describe((1, 4, 5, 16)) == "1 · heads · seq · head_dim"
    assert namer.describe((2, 64), batched=False) == "kv_heads · hidden"   # a parameter has no batch
    assert DimNamer.from_config(tiny_llama().config).describe((64, 64), batched=False) == "hidden · hidden"
    assert DimNamer.from_config(tiny_llama().config).describe((64, 64)) == "? · hidden"


def test_find_config_lookup_order_and_wrappers():
    llama = tiny_llama()
    gpt2 = tiny_gpt2()
    assert find_config({"model": gpt2, "self": llama.model.layers[0].mlp}) is llama.config
    assert locate_config({"config": gpt2.config, "model": llama}) == (gpt2.config, "config")
    wrapped = types.SimpleNamespace(module=llama)  # a DDP-like wrapper without .config
    assert locate_config({"ddp": wrapped}) == (llama.config, "ddp.module.config")
    assert find_config({"h": Hostile(), "x": 3, "model": plain_model()}) is None
    assert not looks_like_config(Hostile()) and looks_like_config(llama.config)


def test_multimodal_text_config():
    text = types.SimpleNamespace(hidden_size=48, num_attention_heads=6, vocab_size=100)
    config = types.SimpleNamespace(text_config=text, vision_config=types.SimpleNamespace(patch_size=14))
    assert looks_like_config(config)
    assert config_sizes(config) == {"hidden": 48, "heads": 6, "head_dim": 8, "vocab": 100}


def test_two_different_configs_in_sight_name_both_and_use_neither(capsys):
    """A Llama and a T5 model in one frame: the tensors could belong to either; dims by one config chosen
    arbitrarily would be wrong for the other's tensors."""
    import llmpdb

    llama, t5 = tiny_llama(), tiny_t5()
    here = {"model": llama, "t5": t5, "hidden": torch.zeros(1, 5, 64)}
    assert locate_config(here) is None
    assert config_candidates(here) == [(llama.config, "model.config"), (t5.config, "t5.config")]
    namer = DimNamer.from_frame(here)
    assert namer.source == "config ?: model.config (LlamaConfig) or t5.config (T5Config)"
    assert namer.describe((1, 5, 64)) == ""  # 64 is Llama's hidden size, but nothing says hidden is Llama's
    # the running module's own config, a `config` local, or two models of one config still answer
    assert locate_config({"self": llama.model.layers[0].mlp, "t5": t5}) == (llama.config, "self.config")
    assert locate_config({"config": t5.config, "model": llama}) == (t5.config, "config")
    assert locate_config({"model": llama, "copy": tiny_llama()}) == (llama.config, "model.config")

    def frame_with_both(model, t5, hidden):
        llmpdb.shapes()

    frame_with_both(llama, t5, torch.zeros(1, 5, 64))
    out = capsys.readouterr().out.replace("\n  ", " ")  # a long footer line wraps with an indent
    assert ("no dims: config ?: model.config (LlamaConfig) or t5.config (T5Config) (which one these tensors "
            "belong to is not known)") in out
    assert "hidden  (1, 5, 64)" in out and "hidden ·" not in out


def test_two_configs_name_only_what_they_agree_on():
    from transformers import LlamaConfig

    from llmpdb.inspect.dims import DimNamer, agreed_sizes

    teacher = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                          num_key_value_heads=2)
    student = LlamaConfig(vocab_size=256, hidden_size=32, intermediate_size=64, num_attention_heads=2,
                          num_key_value_heads=1)
    agreed, ambiguous, kv_name = agreed_sizes([teacher, student])
    assert agreed == {"vocab": 256, "head_dim": 16, "layers": 32}
    assert {32, 64, 128, 4, 2} <= ambiguous and kv_name == "kv_heads"
    namer = DimNamer.from_config(None, batch=3, seq=5, agreed=(agreed, ambiguous, kv_name))
    assert namer.describe((3, 5, 256), path="logits") == "batch · seq · vocab"
    assert namer.describe((3, 5, 64)) == "batch · seq · ?"  # teacher's hidden or student's intermediate
    assert namer.describe((3, 2, 5, 16), path="cache.layers[0].keys") == "batch · kv_heads · seq · head_dim"
