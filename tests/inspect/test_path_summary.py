"""Tests of llmpdb.inspect.path_summary and its header line, at stops inside real tiny models."""

from __future__ import annotations

import sys

import torch

from llmpdb.inspect.modules import frame_stack
from llmpdb.inspect.path_summary import PathSummary, cache_length, path_summary
from llmpdb.forward.breakpoints import ModuleBreakpointEngine
from llmpdb.render.modules import render_path_summary
from llmpdb.render.style import Style
from tiny_models import plain_model, tiny_gpt2, tiny_llama, tiny_t5


def headers_at(pattern: str, model, run, root=None) -> list[str]:
    """The header line at every entry of the modules matching ``pattern`` while ``run()`` runs."""
    seen = []
    engine = ModuleBreakpointEngine(lambda frame, why: seen.append(
        render_path_summary(path_summary(frame_stack(frame), root=root))))
    engine.add(pattern, [model])
    try:
        run()
    finally:
        engine.clear()
    return seen


def test_generate_is_eval_no_grad_with_a_growing_cache():
    model = tiny_llama()
    ids = torch.tensor([[1, 2, 3, 4, 5, 6, 7]])
    with torch.no_grad():
        seen = headers_at("model.layers.0.self_attn", model,
                          lambda: model.generate(ids, max_new_tokens=3, do_sample=False))
    tail = "attn sdpa | model.layers.0.self_attn (LlamaAttention)"
    assert seen == [
        f"path: eval, no_grad, generate(), no labels, cache DynamicCache len 0, {tail}",
        f"path: eval, no_grad, generate(), no labels, cache DynamicCache len 7, {tail}",
        f"path: eval, no_grad, generate(), no labels, cache DynamicCache len 8, {tail}",
    ]


def test_training_forward_has_train_grad_labels_and_autocast():
    model = tiny_llama().train()
    ids = torch.tensor([[1, 2, 3, 4]])
    seen = headers_at("model.layers.1", model, lambda: model(ids, labels=ids, use_cache=False))
    assert seen == ["path: train, grad, labels, no cache, attn sdpa | model.layers.1 (LlamaDecoderLayer)"]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        seen = headers_at("LlamaForCausalLM", model, lambda: model(ids))
    # At the root's entry no cache was passed (LlamaModel creates one further in).
    assert seen == ["path: train, grad, autocast cpu bfloat16, no labels, no cache, attn sdpa "
                    "| (root) (LlamaForCausalLM)"]
    with torch.inference_mode():
        seen = headers_at("lm_head", model.eval(), lambda: model(ids, use_cache=False))
    assert seen == ["path: eval, inference_mode, no labels, no cache, attn sdpa | lm_head (Linear)"]


def test_eager_attention_gpt2_t5_and_plain_tuple_cache():
    model = tiny_llama(attn_implementation="eager")
    seen = headers_at("layers.0.mlp", model, lambda: model(torch.tensor([[1, 2]])))
    assert seen == ["path: eval, grad, no labels, cache DynamicCache len 2, attn eager | model.layers.0.mlp (LlamaMLP)"]

    gpt2 = tiny_gpt2()
    with torch.no_grad():
        seen = headers_at("transformer.h.1.attn", gpt2, lambda: gpt2(torch.tensor([[1, 2, 3]])))
    assert seen == ["path: eval, no_grad, no labels, cache DynamicCache len 3, attn sdpa "
                    "| transformer.h.1.attn (GPT2Attention)"]

    t5 = tiny_t5()
    with torch.no_grad():
        seen = headers_at("decoder.block.1.layer.1", t5, lambda: t5(
            input_ids=torch.tensor([[5, 6, 7]]), decoder_input_ids=torch.tensor([[0, 5]]),
            labels=torch.tensor([[5, 1]])))
    assert len(seen) == 1 and seen[0].startswith("path: eval, no_grad, labels, cache EncoderDecoderCache")
    assert seen[0].endswith("| decoder.block.1.layer.1 (T5LayerCrossAttention)")

    plain = plain_model()
    with torch.no_grad():
        def run():
            _, past = plain(torch.tensor([[1, 2, 3]]))
            plain(torch.tensor([[4]]), past)
        seen = headers_at("blocks.1", plain, run)
    assert seen == ["path: eval, no_grad, no cache | blocks.1 (PlainAttention)",
                    "path: eval, no_grad, cache tuple len 3 | blocks.1 (PlainAttention)"]


def test_outside_any_forward():
    assert path_summary([]) == PathSummary()
    stack = frame_stack(sys._getframe())
    assert render_path_summary(path_summary(stack)) is None  # no module runs here, none was set
    model = tiny_llama()
    header = render_path_summary(path_summary(stack, root=model))
    assert header.startswith("path: eval, ")
    assert header.endswith(", attn sdpa | model LlamaForCausalLM (not in a forward)")
    compiled = torch.compile(model)  # built, never run
    summary = path_summary(stack, root=compiled)
    assert summary.compiled == "a torch.compile'd model (OptimizedModule)" and summary.training is False
    assert render_path_summary(summary).endswith("attn sdpa, torch.compile | model LlamaForCausalLM (not in a forward)")
    coloured = render_path_summary(summary, Style(color=True))
    assert coloured.startswith("\x1b[1mpath:\x1b[0m ") and "\x1b[33mtorch.compile\x1b[0m" in coloured


def test_index_selects_the_frame_and_cache_length_never_reads_data():
    model = tiny_llama()
    summaries = []
    engine = ModuleBreakpointEngine(lambda frame, why: summaries.append(
        [path_summary(frame_stack(frame), i) for i in range(len(frame_stack(frame)))]))
    engine.add("model.layers.1.mlp", [model])
    try:
        with torch.no_grad():
            model(torch.tensor([[1, 2, 3]]))
    finally:
        engine.clear()
    modules = [s.module.qualname if s.module else None for s in summaries[0]]
    assert modules[-1] == "model.layers.1.mlp" and "model.layers.1" in modules and "" in modules

    class Refuses:
        def get_seq_length(self):
            raise RuntimeError("not initialised")

    class TensorLength:
        def get_seq_length(self):
            return torch.tensor(5)  # a tensor would need a read: no length

    meta_key = torch.empty(1, 2, 9, 16, device="meta")
    assert cache_length(Refuses()) is None and cache_length(TensorLength()) is None
    assert cache_length(((meta_key, meta_key),)) == 9 and cache_length(()) is None


def test_a_traceback_frame_that_ended_has_no_grad_mode_to_tell():
    """Post-mortem (or a crash report) after a no_grad forward raised: grad mode is back on by then; the
    header must not say `grad` for a frame that ran under no_grad."""
    model = tiny_llama()
    model.model.layers[1].mlp.down_proj.weight = torch.nn.Parameter(torch.randn(64, 100))
    try:
        with torch.no_grad():
            model(torch.tensor([[1, 2, 3]]))
    except RuntimeError as exc:
        tb = exc.__traceback__
    stack = []
    while tb is not None:
        stack.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    assert torch.is_grad_enabled()
    summary = path_summary(stack)
    assert summary.finished and summary.grad is None and summary.autocast == ()
    line = render_path_summary(summary)
    assert line.startswith("path: eval, grad/autocast ? (the frame ended), no labels, cache DynamicCache len 3")
    assert line.endswith("| model.layers.1.mlp.down_proj (Linear)")
