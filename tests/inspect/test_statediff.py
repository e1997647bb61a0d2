"""llmpdb.inspect.statediff + llmpdb.render.statediff: a model against checkpoints written here, for real."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file, save_model
from tiny_models import plain_model, tiny_llama, tiny_t5

from llmpdb.inspect.checkpoint import CheckpointError
from llmpdb.inspect.statediff import group_names, statediff
from llmpdb.render.statediff import fold_names, render_statediff

SHAPES_HIDDEN_96 = """\
statediff LlamaForCausalLM ↔ big.safetensors (safetensors, 1 file, 21 tensors)
0/21 model tensors match in name, shape and dtype
shape mismatches: 21
  name                                                     model      checkpoint
  model.embed_tokens.weight                                (256, 64)  (256, 96)
  model.layers.{0..1}.self_attn.q_proj.weight (2)          (64, 64)   (96, 96)
  model.layers.{0..1}.self_attn.k_proj.weight (2)          (32, 64)   (48, 96)
  model.layers.{0..1}.self_attn.v_proj.weight (2)          (32, 64)   (48, 96)
  model.layers.{0..1}.self_attn.o_proj.weight (2)          (64, 64)   (96, 96)
  model.layers.{0..1}.mlp.gate_proj.weight (2)             (128, 64)  (128, 96)
  model.layers.{0..1}.mlp.up_proj.weight (2)               (128, 64)  (128, 96)
  model.layers.{0..1}.mlp.down_proj.weight (2)             (64, 128)  (96, 128)
  model.layers.{0..1}.input_layernorm.weight (2)           (64,)      (96,)
  model.layers.{0..1}.post_attention_layernorm.weight (2)  (64,)      (96,)
  model.norm.weight                                        (64,)      (96,)
  lm_head.weight                                           (256, 64)  (256, 96)"""


@pytest.fixture
def here(tmp_path, monkeypatch):
    """Run in tmp_path so that checkpoint labels are short relative paths."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_clean_match_untied_llama(here):
    model = tiny_llama()
    assert model.lm_head.weight is not model.model.embed_tokens.weight  # untied by default in this config
    save_model(model, "m.safetensors")
    d = statediff(model, "m.safetensors")
    assert d.ok and d.matched == d.model_count == d.other_count == 21 and d.tied == [] and d.prefix is None
    assert render_statediff(d, width=100) == (
        "statediff LlamaForCausalLM ↔ m.safetensors (safetensors, 1 file, 21 tensors)\n"
        "21/21 model tensors match in name, shape and dtype"
    )


def test_tied_lm_head_is_not_missing(here):
    model = tiny_llama(tie_word_embeddings=True)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    save_model(model, "t.safetensors")  # stores the shared tensor once
    d = statediff(model, "t.safetensors")
    assert d.ok and d.missing == [] and d.tied == [("model.embed_tokens.weight", "lm_head.weight")]
    assert render_statediff(d, width=100) == (
        "statediff LlamaForCausalLM ↔ t.safetensors (safetensors, 1 file, 20 tensors)\n"
        "20/21 model tensors match in name, shape and dtype; 1 tied, stored once\n"
        "  tied: model.embed_tokens.weight = lm_head.weight"
    )
    torch.save(model.state_dict(), "both.pt")  # torch.save keeps both names
    d = statediff(model, "both.pt")
    assert d.ok and d.matched == 21 and d.tied == []


def test_untied_model_against_a_tied_checkpoint_reports_missing_with_a_note(here):
    save_model(tiny_llama(tie_word_embeddings=True), "t.safetensors")
    d = statediff(tiny_llama(), "t.safetensors")
    assert d.missing == ["model.embed_tokens.weight"] and d.tied == []
    assert render_statediff(d, width=100) == (
        "statediff LlamaForCausalLM ↔ t.safetensors (safetensors, 1 file, 20 tensors)\n"
        "20/21 model tensors match in name, shape and dtype\n"
        "missing: 1 in the model, not in the checkpoint\n"
        "  model.embed_tokens.weight\n"
        "note: model.embed_tokens.weight: the model's class can tie it to lm_head.weight, but here it is a\n"
        "  separate tensor (tie_word_embeddings off), so the checkpoint does not fill it"
    )


def test_ddp_module_prefix(here):
    model = tiny_llama()
    ddp_like = torch.nn.DataParallel(model)  # the real wrapper: names start with `module.`
    torch.save(ddp_like.state_dict(), "ddp.pt")
    d = statediff(model, "ddp.pt")
    assert d.ok and d.prefix.steps == (("strip", "module."),) and (d.prefix.before, d.prefix.after) == (0, 21)
    assert render_statediff(d, width=100) == (
        "statediff LlamaForCausalLM ↔ ddp.pt (pickle, 1 file, 21 tensors)\n"
        "strip `module.` → 21/21 match (0/21 as saved)\n"
        "21/21 model tensors match in name, shape and dtype"
    )


def test_torch_compile_orig_mod_prefix(here):
    model = tiny_llama()
    torch.save(torch.compile(model).state_dict(), "compiled.pt")
    d = statediff(model, "compiled.pt")
    assert d.ok and d.prefix.describe() == "strip `_orig_mod.`"
    assert render_statediff(d, width=100).splitlines()[1] == "strip `_orig_mod.` → 21/21 match (0/21 as saved)"


def test_ddp_of_compiled_strips_both(here):
    model = tiny_llama()
    torch.save({f"module._orig_mod.{k}": v for k, v in model.state_dict().items()}, "both.pt")
    d = statediff(model, "both.pt")
    assert d.ok and d.prefix.describe() == "strip `module._orig_mod.`"


def test_changed_hidden_size_lists_both_shapes(here):
    save_model(tiny_llama(hidden_size=96), "big.safetensors")
    d = statediff(tiny_llama(), "big.safetensors")
    assert len(d.shape_mismatches) == 21 and d.matched == 0 and not d.missing and not d.unexpected
    first = d.shape_mismatches[0]
    assert (first.name, first.model.shape, first.other.shape) == ("model.embed_tokens.weight", (256, 64), (256, 96))
    assert render_statediff(d, width=100) == SHAPES_HIDDEN_96


def test_long_lists_are_cut_at_the_limit(here):
    save_model(tiny_llama(hidden_size=96), "big.safetensors")
    text = render_statediff(statediff(tiny_llama(), "big.safetensors"), width=100, limit=3)
    assert text.splitlines()[-4:] == [
        "  model.embed_tokens.weight                        (256, 64)  (256, 96)",
        "  model.layers.{0..1}.self_attn.q_proj.weight (2)  (64, 64)   (96, 96)",
        "  model.layers.{0..1}.self_attn.k_proj.weight (2)  (32, 64)   (48, 96)",
        "  … 9 more lines (--all lists every tensor)",
    ]
    full = render_statediff(statediff(tiny_llama(), "big.safetensors"), width=100, full=True)
    assert len(full.splitlines()) == 3 + 1 + 21 and "{0..1}" not in full


def test_removed_layer_and_extra_head(here):
    state = tiny_llama(num_hidden_layers=1).state_dict()
    state["score.weight"] = torch.zeros(2, 64)
    save_file(state, "x.safetensors")
    d = statediff(tiny_llama(), "x.safetensors")
    assert d.missing == [n for n in tiny_llama().state_dict() if n.startswith("model.layers.1.")]
    assert [(n, m.shape) for n, m in d.unexpected] == [("score.weight", (2, 64))]
    assert render_statediff(d, width=100) == (
        "statediff LlamaForCausalLM ↔ x.safetensors (safetensors, 1 file, 13 tensors)\n"
        "12/21 model tensors match in name, shape and dtype\n"
        "missing: 9 in the model, not in the checkpoint\n"
        "  model.layers.1.* (9)\n"
        "unexpected: 1 in the checkpoint, not in the model\n"
        "  score.weight  (2, 64)  f32"
    )


def test_many_missing_layers_fold_into_one_line(here):
    save_model(tiny_llama(), "two.safetensors")
    d = statediff(tiny_llama(num_hidden_layers=32), "two.safetensors")
    assert len(d.missing) == 30 * 9
    assert render_statediff(d, width=100).splitlines()[2:] == [
        "missing: 270 in the model, not in the checkpoint",
        "  model.layers.{2..31}.* (270)",
    ]


def test_dtype_differences(here):
    save_model(tiny_llama().to(torch.bfloat16), "bf.safetensors")
    d = statediff(tiny_llama(), "bf.safetensors")
    assert len(d.dtype_mismatches) == 21 and not d.shape_mismatches
    lines = render_statediff(d, width=100).splitlines()
    assert lines[2:5] == [
        "dtype differences: 21",
        "  name                                                     model  checkpoint",
        "  model.embed_tokens.weight                                f32    bf16",
    ]


def test_base_model_checkpoint_adds_the_prefix(here):
    model = tiny_llama()
    save_model(model.model, "base.safetensors")
    d = statediff(model, "base.safetensors")
    assert d.prefix.describe() == "add `model.`" and d.missing == ["lm_head.weight"] and d.matched == 20


def test_sharded_folder_written_by_save_pretrained(here):
    model = tiny_llama()
    model.save_pretrained("out", max_shard_size="60KB")
    d = statediff(model, "out")
    assert d.ok and d.other_files > 1 and d.other_kind == "safetensors"
    assert render_statediff(d, width=100).splitlines()[0] == (
        f"statediff LlamaForCausalLM ↔ out (safetensors, {d.other_files} files, 21 tensors)")
    assert statediff(model, "out/model.safetensors.index.json").ok


def test_nested_model_state_dict_pt(here):
    model = tiny_llama()
    optimizer = torch.optim.AdamW(model.parameters())
    torch.save({"model_state_dict": model.state_dict(), "optimizer_state_dict": optimizer.state_dict(), "step": 3},
               "ckpt.pt")
    d = statediff(model, "ckpt.pt")
    assert d.ok and d.nested_under == "model_state_dict"
    assert render_statediff(d, width=100) == (
        "statediff LlamaForCausalLM ↔ ckpt.pt (pickle, 1 file, 21 tensors, under `model_state_dict`)\n"
        "21/21 model tensors match in name, shape and dtype"
    )


def test_second_expression_module_and_state_dict():
    model = tiny_llama()
    d = statediff(model.model, model)
    assert d.prefix.describe() == "strip `model.`" and [n for n, _ in d.unexpected] == ["lm_head.weight"]
    assert render_statediff(d, width=100).splitlines()[0] == (
        "statediff LlamaModel ↔ LlamaForCausalLM (module, 21 tensors)")
    nested = {"model_state_dict": model.state_dict(), "step": 1}
    d = statediff(model, nested, other_label="checkpoint")
    assert d.ok and d.nested_under == "model_state_dict"


def test_state_dict_as_model_detects_ties_by_storage(here):
    tied = tiny_llama(tie_word_embeddings=True)
    save_model(tied, "t.safetensors")
    d = statediff(tied.state_dict(), "t.safetensors")
    assert d.ok and d.tied == [("model.embed_tokens.weight", "lm_head.weight")]


def test_plain_model_and_bad_inputs(here):
    model = plain_model()
    torch.save(model.state_dict(), "plain.pt")
    assert statediff(model, "plain.pt").ok
    with pytest.raises(CheckpointError, match=r"^a int, not a module, a state dict or a checkpoint path$"):
        statediff(model, 42)
    with pytest.raises(CheckpointError, match=r"^x is a str"):
        statediff("x", "plain.pt", model_label="x")


def test_group_names_patterns():
    names = [f"model.layers.{i}.self_attn.q_proj.weight" for i in range(32)] + ["model.norm.weight"]
    assert [g.pattern for g in group_names(names)] == [
        "model.layers.{0..31}.self_attn.q_proj.weight", "model.norm.weight"]
    gaps = [f"h.{i}.attn.c_attn.weight" for i in (0, 2, 5, 6, 7)]
    assert group_names(gaps)[0].pattern == "h.{0,2,5..7}.attn.c_attn.weight"
    t5 = [g.pattern for g in group_names(list(tiny_t5().state_dict()))]
    assert "encoder.block.{0..1}.layer.1.DenseReluDense.wi.weight" in t5
    assert "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight" in t5
    assert group_names(["a.0.w", "a.1.w"], payload=lambda n: n)[0].pattern == "a.0.w"  # payloads differ


def test_fold_names_keeps_mixed_modules_open():
    universe = ["a.0.w", "a.0.b", "a.1.w", "a.1.b", "head.w"]
    status = {"a.0.w": 1, "a.0.b": 1, "a.1.w": 1, "a.1.b": 2, "head.w": 1}.__getitem__
    assert fold_names(universe, status) == [
        ("a.0.*", ["a.0.w", "a.0.b"], 1), ("a.1.w", ["a.1.w"], 1), ("a.1.b", ["a.1.b"], 2), ("head.w", ["head.w"], 1)]


def test_an_ambiguous_prefix_names_the_candidates_and_applies_none():
    model = {"a.w": torch.zeros(2), "b.w": torch.zeros(2)}
    two_copies = {"x.a.w": torch.zeros(2), "x.b.w": torch.zeros(2), "y.a.w": torch.zeros(2), "y.b.w": torch.zeros(2)}
    d = statediff(model, two_copies)
    assert d.prefix is None and d.matched == 0
    assert "note: ambiguous prefix: strip `x.` or strip `y.` each give 2/2 names (0/2 as saved); none applied" \
        in render_statediff(d, width=100)
    one = statediff(model, {"module.a.w": torch.zeros(2), "module.b.w": torch.zeros(2)})
    assert one.prefix.describe() == "strip `module.`" and one.matched == 2 and not one.notes
