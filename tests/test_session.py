"""Per-stop notes: the KV history is recorded at every stop, a failing provider is one line."""

from __future__ import annotations

import torch

from llmpdb.session import SESSION, STOP_NOTE_PROVIDERS, register_stop_note, stop_notes
from tiny_models import tiny_llama
from transcript import debug_transcript


def _decode_three_steps(model):
    ids = torch.tensor([[1, 5, 9, 4, 7]])
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=True)
        past_key_values = out.past_key_values
        breakpoint()  # prefill: 5 positions
        for _ in range(2):
            nxt = out.logits[:, -1:].argmax(-1)
            out = model(input_ids=nxt, past_key_values=past_key_values, use_cache=True)
            past_key_values = out.past_key_values
            breakpoint()  # one more position per step
    return past_key_values


def test_kv_history_covers_stops_where_kv_was_never_typed():
    SESSION.reset()
    out = debug_transcript(_decode_three_steps, ["c", "c", "c", "kv --history", "c"], tiny_llama())
    assert "kv history: 3 stops, 1 cache" in out
    assert "DynamicCache (past_key_values): seq 5 -> 6 -> 7 (+1 per stop)" in out


def test_a_failing_provider_is_reported_in_one_line():
    def broken_note(frame, debugger):
        raise RuntimeError("boom")

    register_stop_note(broken_note)
    try:
        lines = stop_notes(None, object())
    finally:
        STOP_NOTE_PROVIDERS.remove(broken_note)
    assert "llmpdb: broken_note failed: RuntimeError: boom" in lines
