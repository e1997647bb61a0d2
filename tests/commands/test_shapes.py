"""The ``shapes`` command under a real llmpdb debugger (tests/transcript.py), at width 100, no colour."""

from __future__ import annotations

import torch
from torch import nn

from transcript import debug_transcript
from tiny_models import tiny_llama

PROMPT = "(llmpdb) "


def answers(transcript: str) -> list[str]:
    """The output of each command, in order (the text between one prompt and the next)."""
    return [part.rstrip("\n") for part in transcript.split(PROMPT)[1:]]


def infer():
    from transformers import BatchEncoding

    model = tiny_llama()
    ids = torch.tensor([[1, 2, 3, 4, 5, 6, 7]])
    inputs = BatchEncoding({"input_ids": ids, "attention_mask": torch.ones_like(ids)})
    with torch.no_grad():
        outputs = model(**inputs)
    breakpoint()
    return outputs


def test_shapes_frame_expr_stats_and_errors():
    out = answers(debug_transcript(infer, [
        "c", "shapes", "shapes inputs", "shapes outputs.logits[:, -1] --stats", "shapes nope",
        "shapes ids --bogus", "shapes 3", "shapes inputs['input_ids']", "c"]))
    assert out[1] == """\
path                            shape          dtype     size  dims
ids                             (1, 7)         i64       56 B  batch · seq
inputs['input_ids']             (1, 7)         i64       56 B  batch · seq
inputs['attention_mask']        (1, 7)         i64       56 B  batch · seq
outputs.logits                  (1, 7, 256)    f32    7.0 KiB  batch · seq · vocab
outputs.cache.layers[0].keys    (1, 2, 7, 16)  f32      896 B  batch · kv_heads · seq · head_dim
outputs.cache.layers[0].values  (1, 2, 7, 16)  f32      896 B  batch · kv_heads · seq · head_dim
outputs.cache.layers[1].keys    (1, 2, 7, 16)  f32      896 B  batch · kv_heads · seq · head_dim
outputs.cache.layers[1].values  (1, 2, 7, 16)  f32      896 B  batch · kv_heads · seq · head_dim
8 tensors, 10.6 KiB total
same tensor, counted once: inputs['input_ids'] = ids
dims from model.config (LlamaConfig), batch/seq from inputs['input_ids']
modules and optimizers (summarized, not expanded; `shapes NAME` lists a module's tensors):
object  class             params  dtype  device       size  detail
model   LlamaForCausalLM  106.8K  f32    cpu     417.3 KiB  eval"""
    assert out[2].splitlines()[1:3] == ["inputs['input_ids']       (1, 7)  i64    56 B  batch · seq",
                                        "inputs['attention_mask']  (1, 7)  i64    56 B  batch · seq"]
    stats = out[3].splitlines()
    assert stats[0].split() == ["path", "shape", "dtype", "size", "min", "max", "mean", "std", "dims"]
    assert stats[1].startswith("outputs.logits[:, -1]  (1, 256)  f32    1.0 KiB")
    assert stats[1].endswith("batch · vocab")  # --stats keeps the dims column
    assert stats[4] == "min/max/mean/std ignore NaN and Inf; no NaN or Inf in any tensor; std is unbiased"
    assert out[4] == "*** shapes: cannot evaluate 'nope': NameError: name 'nope' is not defined"
    assert out[5] == "*** shapes: unknown option --bogus (usage: shapes [EXPR] [--stats] [--no-stats])"
    assert out[6] == "no tensors in 3 (int)"
    assert out[7].splitlines()[1].startswith("inputs['input_ids']  (1, 7)  i64")


def test_help_shapes():
    out = answers(debug_transcript(lambda: None, ["help shapes", "c"]))
    lines = out[0].splitlines()
    assert lines[0] == "shapes [EXPR] [--stats] [--no-stats]"
    assert any(line.startswith("--stats") for line in lines)


class Block(nn.Module):
    """A module whose forward stops: dims come from ``self.config``, ``self`` is one summary row."""

    def __init__(self):
        super().__init__()
        self.inner = tiny_llama()
        self.config = self.inner.config

    def forward(self, input_ids):
        hidden_states = self.inner.model.embed_tokens(input_ids)
        q = hidden_states.view(1, 7, 4, 16).transpose(1, 2)
        breakpoint()
        return q


def caller():
    block = Block()
    weird = Hostile()
    return block(torch.zeros(1, 7, dtype=torch.long))


class Hostile:
    def __repr__(self):
        raise RuntimeError("no repr")

    def __getattr__(self, name):
        raise RuntimeError(f"no {name}")


def test_shapes_inside_a_module_forward_and_after_up():
    out = answers(debug_transcript(caller, ["c", "shapes", "up", "up", "up", "shapes", "c"]))
    assert out[1] == """\
path           shape          dtype     size  grad       flags           dims
input_ids      (1, 7)         i64       56 B                             batch·seq
hidden_states  (1, 7, 64)     f32    1.8 KiB  Embedding                  batch·seq·hidden
q              (1, 4, 7, 16)  f32    1.8 KiB  Transpose  non-contiguous  batch·heads·seq·head_dim
3 tensors, 3.6 KiB total
dims from self.config (LlamaConfig), batch/seq from input_ids
modules and optimizers (summarized, not expanded; `shapes NAME` lists a module's tensors):
object  class  params  dtype  device       size  detail
self    Block  106.8K  f32    cpu     417.3 KiB  training"""
    # three frames up (past Module._call_impl plumbing) is caller(): no tensors, one module, a hostile local
    assert "caller()" in out[4]
    assert out[5] == """\
no tensors in this frame's locals
modules and optimizers (summarized, not expanded; `shapes NAME` lists a module's tensors):
object  class  params  dtype  device       size  detail
block   Block  106.8K  f32    cpu     417.3 KiB  training"""


def meta_frame():
    with torch.device("meta"):
        model = tiny_llama()
    hidden = torch.empty(1, 7, 64, device="meta")
    breakpoint()
    return model, hidden


def test_shapes_stats_on_meta_tensors_computes_nothing():
    out = answers(debug_transcript(meta_frame, ["c", "shapes --stats", "shapes model.lm_head", "c"]))
    assert out[1].splitlines()[:2] == [
        "path    shape       dtype  device     size  min  max  mean  std  dims",
        "hidden  (1, 7, 64)  f32    meta    1.8 KiB    -    -     -    -  1 · ? · hidden"]
    assert out[1].splitlines()[2:5] == [
        "1 tensor, 0 B total (+ 1.8 KiB on the meta device, not allocated)", "dims from model.config (LlamaConfig); ? = unknown or shared size",
        "no statistics for 1 tensor (meta: no readable data, nothing computed)"]
    assert out[2].splitlines()[1] == \
        "model.lm_head.weight  (256, 64)  f32    meta    64.0 KiB  leaf  Parameter  vocab · hidden"


def compiled_frame():
    def g(x):
        y = x * 2
        breakpoint()
        return y + 1

    return torch.compile(g, backend="eager")(torch.ones(3))


def test_shapes_in_compiled_code_warns_about_missing_locals_once_per_stop():
    transcript = debug_transcript(compiled_frame, ["c", "shapes", "c"])
    out = answers(transcript)
    assert transcript.count("locals computed inside the compiled graph are missing") == 1  # the stop said it
    assert out[0].splitlines()[-1].startswith("llmpdb: stopped in code run through torch.compile")
    lines = out[1].splitlines()
    assert lines[0:3] == ["path  shape  dtype  size", "x     (3,)   f32    12 B", "1 tensor, 12 B total"]


def stopping_attention(module, query, key, value, attention_mask, **kwargs):
    """An attention implementation that stops: `up` is then LlamaAttention.forward, a real frame."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    breakpoint()
    return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)


def llama_attention_stop():
    from transformers import AttentionInterface

    AttentionInterface.register("llmpdb_test_stop", stopping_attention)
    model = tiny_llama(num_hidden_layers=1, attn_implementation="llmpdb_test_stop")
    with torch.no_grad():
        return model(torch.tensor([[1, 2, 3, 4, 5, 6, 7]]))


def test_shapes_in_llama_attention_forward():
    out = answers(debug_transcript(llama_attention_stop, ["c", "shapes", "up", "shapes", "c"]))
    assert out[1].splitlines()[:3] == [
        "path                    shape          dtype     size  flags           dims",
        "query                   (1, 4, 7, 16)  f32    1.8 KiB  non-contiguous  batch·heads·seq·head_dim",
        "key                     (1, 2, 7, 16)  f32      896 B                  batch·kv_heads·seq·head_dim"]
    # the batch comes from the enclosing LlamaAttention.forward's hidden_states
    assert "dims from module.config (LlamaConfig), batch/seq from hidden_states of LlamaAttention.forward" in out[1]
    rows = {line.split()[0]: line for line in out[3].splitlines()}
    assert rows["query_states"].endswith("(1, 4, 7, 16)  f32    1.8 KiB  non-contiguous  batch·heads·seq·head_dim")
    assert rows["key_states"].endswith("(1, 2, 7, 16)  f32      896 B                  batch·kv_heads·seq·head_dim")
    assert rows["cache.layers[0].keys"].split()[1:5] == ["(1,", "2,", "7,", "16)"]
    assert rows["hidden_states"].endswith("batch·seq·hidden")
    assert "same tensor, counted once: key_states = cache.layers[0].keys" in out[3]
    assert rows["self"].split()[:3] == ["self", "LlamaAttention", "12.3K"]
