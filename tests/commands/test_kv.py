"""The ``kv`` command under a real llmpdb debugger (transcripts), its argument parser, and the history."""

from __future__ import annotations

import bdb
import inspect
import re

import pytest
import torch
import transformers.models.llama.modeling_llama as modeling_llama
from tiny_models import plain_model, tiny_llama, tiny_t5
from transcript import debug_transcript

from llmpdb.commands._command import CommandError
from llmpdb.commands.kv import KvArgs, kv_history, parse_kv_args, record_kv_history
from llmpdb.inspect.kv import SEARCHED
from llmpdb.session import SESSION

PROMPT = "(llmpdb) "


def generate_with_stops(model, steps: int = 3, **generate_kwargs):
    """generate() that stops (breakpoint()) in a forward pre-hook at every decoding step (not the prefill)."""

    def hook(module, args, kwargs):
        cache = kwargs.get("cache")
        if cache is not None and cache.get_seq_length() > 0:
            breakpoint()

    handle = model.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        torch.manual_seed(1)
        model.generate(torch.randint(3, 200, (1, 7)), max_new_tokens=steps, do_sample=False, **generate_kwargs)
    finally:
        handle.remove()


def outputs_of(transcript: str) -> list[str]:
    """The text each command printed, one string per prompt, in order (the first stop's echo dropped)."""
    return [chunk.rstrip("\n") for chunk in transcript.split(PROMPT)[1:]]


def test_parse_kv_args():
    assert parse_kv_args("") == KvArgs()
    assert parse_kv_args("0") == KvArgs(layer=0)
    assert parse_kv_args("-1 --stats") == KvArgs(layer=-1, stats=True)
    assert parse_kv_args("outputs.cache 1") == KvArgs("outputs.cache", 1)
    assert parse_kv_args("d['past key'] --layer cross:1 --stats") == KvArgs("d['past key']", 1, "cross", True)
    assert parse_kv_args("--history") == KvArgs(history=True)
    assert parse_kv_args("cache[0]") == KvArgs("cache[0]")
    assert parse_kv_args("self:0") == KvArgs(layer=0, part="self")
    with pytest.raises(CommandError, match="unknown option --bogus"):
        parse_kv_args("--bogus")
    with pytest.raises(CommandError, match="--stats shows the values of one layer"):
        parse_kv_args("--stats")
    with pytest.raises(CommandError, match="bad layer 'x'"):
        parse_kv_args("--layer x")


def test_two_consecutive_decoding_steps_then_history():
    commands = ["c", "kv", "c", "kv", "c", "kv --history", "c"]
    chunks = outputs_of(debug_transcript(generate_with_stops, commands, tiny_llama(), steps=4))
    assert "-> breakpoint()" in chunks[0]  # each `c` prints the next stop
    step1, step2, history = chunks[1], chunks[3], chunks[5]
    assert step1.splitlines() == [
        "cache: DynamicCache  2 layers  seq 7 (filled)  kv heads 2 / q heads 4 (GQA ×2)  head_dim 16  f32 cpu",
        "  3.5 KiB",
        "memory 3.5 KiB = 2 × 2 layers × 2 kv heads × 16 head_dim × 7 seq × 4 B",
        "layer  type  keys           values         filled/capacity  window",
        "0      full  (1, 2, 7, 16)  (1, 2, 7, 16)  7 / —            —",
        "1      full  (1, 2, 7, 16)  (1, 2, 7, 16)  7 / —            —",
    ]
    assert "1      full  (1, 2, 8, 16)  (1, 2, 8, 16)  8 / —            —" in step2.splitlines()
    assert "memory 4.0 KiB = 2 × 2 layers × 2 kv heads × 16 head_dim × 8 seq × 4 B" in step2.splitlines()
    lines = history.splitlines()
    assert lines[:2] == ["kv history: 3 stops, 1 cache", "DynamicCache (cache): seq 7 -> 8 -> 9 (+1 per stop)"]
    assert [line.split()[2:4] for line in lines[3:6]] == [["7", "7"], ["8", "8"], ["9", "9"]]
    assert [int(line.split()[0]) for line in lines[3:6]] == [2, 3, 4]  # SESSION.stop: stop 1 is the start


def test_layer_detail_with_stats_and_static_capacity():
    out = debug_transcript(generate_with_stops, ["c", "kv", "kv -1 --stats", "c", "c"], tiny_llama(), steps=2,
                           cache_implementation="static")
    summary, detail = outputs_of(out)[1:3]
    assert "0      static  (1, 2, 8, 16)  (1, 2, 8, 16)  7 / 8            —" in summary.splitlines()
    assert "static capacity" in summary
    lines = detail.splitlines()
    assert lines[0] == "layer 1  static  StaticLayer  filled 7 / 8  of StaticCache"
    # 109 columns with every column: the device column goes first, to fit 100 (said below the table)
    assert lines[1].split() == ["tensor", "shape", "dtype", "bytes", "min", "max", "mean", "std", "nan", "inf"]
    assert max(len(line) for line in lines) <= 100
    assert lines[2].split()[:7] == ["keys", "(1,", "2,", "8,", "16)", "f32", "1.0"]
    assert lines[2].split()[-2:] == ["0", "0"]  # no NaN, no Inf
    assert lines[4].split()[:2] == ["cumulative_length", "()"]
    assert lines[-2:] == ["device column hidden to fit 100 columns",
                          "position 7 of the preallocated tensors is not filled yet"]


def test_encoder_decoder_parts():
    out = debug_transcript(generate_with_stops, ["c", "kv cross:1", "kv self:0", "kv cross:2", "c", "c"], tiny_t5(),
                           steps=2)
    cross, self_part, bad = outputs_of(out)[1:4]
    assert cross.splitlines()[0] == "layer 1 (cross)  full  DynamicLayer  filled 7 / —  of EncoderDecoderCache"
    assert self_part.splitlines()[0] == "layer 0 (self)  full  DynamicLayer  filled 1 / —  of EncoderDecoderCache"
    assert bad.strip() == "*** kv: no cross layer 2 in cache (2 layers: 0-1)"


def decode_plain(steps: int = 2):
    model = plain_model()
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    past = None
    with torch.no_grad():
        for _ in range(steps):
            logits, past = model(ids, past)
            ids = logits[:, -1:].argmax(-1)
            breakpoint()
    return past


def test_plain_pytorch_tuple_cache_found_and_by_expression():
    out = debug_transcript(decode_plain, ["c", "kv", "c", "kv past 0", "kv ids", "c"])
    chunks = outputs_of(out)
    first, layer, not_cache = chunks[1], chunks[3], chunks[4]
    assert first.splitlines()[0] == "past: tuple  2 layers  seq 5 (filled)  kv heads 4  head_dim 8  f32 cpu  2.5 KiB"
    assert "0      full  (1, 4, 5, 8)  (1, 4, 5, 8)  5 / —            —" in first.splitlines()
    assert layer.splitlines()[0] == "layer 0  full  tuple  filled 6 / —  of tuple"
    assert not_cache.strip().startswith("*** kv: ids is a Tensor, not a KV cache")


def no_cache_here():
    numbers = [1, 2, 3]
    breakpoint()
    return numbers


def test_no_cache_in_frame_says_where_it_looked_within_the_width():
    out = debug_transcript(no_cache_here, ["c", "kv", "kv 0", "c"])
    for chunk in outputs_of(out)[1:3]:
        lines = chunk.strip().splitlines()
        assert lines[0] == "*** kv: no KV cache in this frame or the model frames around it"
        assert " ".join(" ".join(lines[1:]).split()) == f"(looked at {SEARCHED})"
        assert all(len(line) <= 100 and line.startswith("  ") for line in lines[1:])


def llama_then_generate():
    model = tiny_llama()
    torch.manual_seed(1)
    ids = torch.randint(3, 200, (1, 7))
    breakpoint()
    model.generate(ids, max_new_tokens=2, do_sample=False)


def test_inside_the_mlp_kv_finds_the_cache_of_the_decoder_layer_and_says_where():
    """The path line sees the cache of the enclosing model frames; `kv` finds the same one and names its frame."""
    out = debug_transcript(llama_then_generate, ["c", "bm layers.1.mlp", "c", "kv", "kv 0", "kv --history",
                                                 "clear-module all", "c"])
    chunks = outputs_of(out)
    stop, summary, layer, history = chunks[2], chunks[3], chunks[4], chunks[5]
    assert "path: eval, no_grad, generate(), no labels, cache DynamicCache len 7" in stop
    assert "(LlamaMLP)" in stop
    lines = summary.splitlines()
    match = re.fullmatch(r"cache from LlamaDecoderLayer\.forward \(frame (\d+)\): cache", lines[0])
    assert match, lines[0]
    assert lines[1].startswith("cache: DynamicCache  2 layers  seq 7 (filled)  kv heads 2 / q heads 4 (GQA ×2)")
    assert "1      full  (1, 2, 7, 16)  (1, 2, 7, 16)  7 / —            —" in lines  # layer 1 updated before its MLP
    assert layer.splitlines()[1] == "layer 0  full  DynamicLayer  filled 7 / —  of DynamicCache"
    assert history.splitlines()[0] == "kv history: 1 stop, 1 cache"  # the stop recorded the enclosing cache too
    number = int(match.group(1))
    check = outputs_of(debug_transcript(llama_then_generate, [
        "c", "bm layers.1.mlp", "c", f"frame {number}", "p type(self).__name__, self.self_attn.layer_idx",
        "clear-module all", "c"]))
    assert check[4].strip() == "('LlamaDecoderLayer', 1)"  # the frame number is the one `frame N` goes to


def plain_decode_stopping():
    model = plain_model()
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    past = None
    breakpoint()
    with torch.no_grad():
        for _ in range(2):
            logits, past = model(ids, past)
            ids = logits[:, -1:].argmax(-1)
    return past


def test_kv_on_one_layers_pair_explains_it_and_bare_kv_finds_the_whole_cache():
    out = debug_transcript(plain_decode_stopping, ["c", "bm blocks.1", "c", "c", "kv past", "kv past 0 --stats",
                                                   "kv past 1", "kv", "clear-module all", "c"])
    pair, stats, bad, whole = outputs_of(out)[4:8]
    assert pair.splitlines() == [
        "past is one layer's (keys, values) pair, not a whole cache",
        "seq 5  kv heads 4  head_dim 8  (read as batch · kv_heads · seq · head_dim)",
        "tensor  shape         dtype  device  bytes",
        "keys    (1, 4, 5, 8)  f32    cpu     640 B",
        "values  (1, 4, 5, 8)  f32    cpu     640 B",
        "`kv` alone finds the whole cache (this frame, then the model frames around it)",
    ]
    assert stats.splitlines()[2].split()[:2] == ["tensor", "shape"] and stats.splitlines()[3].split()[-2:] == ["0", "0"]
    assert bad.strip() == "*** kv: past is one layer's (keys, values) pair: it has no layer 1"
    lines = whole.splitlines()
    assert re.fullmatch(r"cache from PlainLM\.forward \(frame \d+\): past", lines[0])
    assert lines[1] == "past: tuple  2 layers  seq 5 (filled)  kv heads 4  head_dim 8  f32 cpu  2.5 KiB"


def test_bad_arguments_are_one_line():
    out = debug_transcript(no_cache_here, ["c", "kv --stats", "kv numbers", "c"])
    stats, not_cache = outputs_of(out)[1:3]
    assert stats.strip() == "*** kv: --stats shows the values of one layer: give it, e.g. `kv 0 --stats`"
    assert not_cache.strip().startswith("*** kv: numbers is a list, not a KV cache")


def test_help_starts_with_usage():
    help_text = outputs_of(debug_transcript(no_cache_here, ["help kv", "c"]))[0].splitlines()
    assert help_text[0] == "kv [EXPR] [LAYER] [--stats] [--history]"
    assert any(line.startswith("--history") for line in help_text)


def test_record_kv_history_at_each_stop_without_the_command():
    model = tiny_llama()

    def hook(module, args, kwargs):
        SESSION.stop += 1
        record_kv_history({"kwargs": kwargs, "module": module})
        record_kv_history({"kwargs": kwargs, "module": module})  # a second call at the same stop adds nothing

    handle = model.register_forward_pre_hook(hook, with_kwargs=True)
    torch.manual_seed(1)
    model.generate(torch.randint(3, 200, (1, 7)), max_new_tokens=4, do_sample=False)
    model.generate(torch.randint(3, 200, (1, 5)), max_new_tokens=2, do_sample=False)
    handle.remove()
    entries = kv_history()
    # the empty caches of the prefills are recorded too (seq None): they show where each generate starts
    assert [(e.stop, e.seq, e.filled) for e in entries] == [
        (1, None, (None, None)), (2, 7, (7, 7)), (3, 8, (8, 8)), (4, 9, (9, 9)),
        (5, None, (None, None)), (6, 5, (5, 5)),
    ]
    assert entries[0].cache_id == entries[3].cache_id != entries[4].cache_id
    assert record_kv_history({"x": 1}) is None


def test_record_kv_history_never_raises():
    class Broken:
        key_cache = [torch.zeros(1, 1, 1, 1)]
        value_cache = 3  # not a list: not a layout the inspector knows

    assert record_kv_history({}, cache=Broken()) is None
    assert SESSION.memory("kv-history-errors", list)[-1].startswith("stop 0: NotACacheError: a Broken: no .layers")


def generate_llama():
    model = tiny_llama()
    torch.manual_seed(1)
    model.generate(torch.randint(3, 200, (1, 7)), max_new_tokens=2, do_sample=False)


def test_inside_the_attention_forward_mid_prefill():
    source, start = inspect.getsourcelines(modeling_llama.LlamaAttention.forward)
    line = start + next(i for i, text in enumerate(source) if "cache.update(" in text)
    try:
        out = debug_transcript(generate_llama, [f"b {modeling_llama.__file__}:{line}", "c", "c", "kv"])
    finally:
        bdb.Breakpoint.clearBreakpoints()
    lines = outputs_of(out)[3].splitlines()
    assert lines[0].startswith("cache: DynamicCache  2 layers  seq 7 (filled)  kv heads 2 / q heads 4 (GQA ×2)")
    assert lines[2:4] == ["memory 1.8 KiB ≠ 3.5 KiB from 2 × 2 layers × 2 kv heads × 16 head_dim × 7 seq × 4 B: "
                          "layer 1 not", "  initialised"]
    assert lines[5:] == [
        "0      full  (1, 2, 7, 16)  (1, 2, 7, 16)  7 / —            —",
        "1      full  —              —              — / —            —",
        "layer 1: not initialised yet (allocated on first update)",
        "this frame is layer 1 (self.layer_idx)",
    ]


def meta_cache_stop():
    from transformers import DynamicCache

    cache = DynamicCache()
    for i in range(2):
        cache.update(torch.empty(1, 2, 5, 16, device="meta"), torch.empty(1, 2, 5, 16, device="meta"), i)
    breakpoint()
    return cache


def test_a_meta_cache_is_zero_bytes_resident_and_says_meta():
    out = debug_transcript(meta_cache_stop, ["c", "kv cache", "kv cache 0", "mem", "c"], width=200)
    summary, layer, mem = outputs_of(out)[1:4]
    assert summary.startswith("cache: DynamicCache  2 layers  seq 5 (filled)  kv heads 2  head_dim 16  f32 meta  "
                              "0 B resident (meta)\n")
    assert "memory 0 B resident (meta tensors); 2.5 KiB once materialised = 2 × 2 layers" in summary
    assert [line.split()[-1] for line in layer.splitlines()[2:4]] == ["meta", "meta"]
    held = next(line for line in mem.splitlines() if line.startswith("kv cache"))
    assert held.split()[4:6] == ["0", "B"]  # kv cache  cache (DynamicCache)  0 B  detail
