"""`kv` typed into a real terminal at the stop after model(**inputs) in examples/infer.py."""

from __future__ import annotations

import pytest

from .pty_session import PtySession

pytestmark = pytest.mark.timeout(120)


def _rows(text: str) -> dict[str, list[str]]:
    """Table rows by their first cell."""
    return {line.split()[0]: line.split()[1:] for line in text.splitlines() if line.split()}


def test_kv_after_the_model_call():
    with PtySession(["-m", "llmpdb", "examples/infer.py"]) as s:
        s.wait_prompt()
        s.run("c")
        assert " ".join(s.run("kv").split()).startswith(
            "*** kv: no KV cache in this frame or the model frames around it (looked at past_key_values")

        s.run("c")
        stop3 = s.run("c")
        assert "logits = outputs.logits" in stop3
        table = s.run("kv")
        lines = table.splitlines()
        assert lines[0] == ("outputs.cache: DynamicCache  2 layers  seq 7 (filled)  kv heads 2 / q heads 4 (GQA ×2)  "
                            "head_dim 16  f32 cpu  3.5 KiB")
        assert lines[1] == "memory 3.5 KiB = 2 × 2 layers × 2 kv heads × 16 head_dim × 7 seq × 4 B"
        rows = _rows(table)
        assert rows["layer"] == ["type", "keys", "values", "filled/capacity", "window"]
        for layer in ("0", "1"):
            assert " ".join(rows[layer]) == "full (1, 2, 7, 16) (1, 2, 7, 16) 7 / — —"

        detail = s.run("kv 1 --stats").splitlines()
        assert detail[0] == "layer 1  full  DynamicLayer  filled 7 / —  of DynamicCache"
        assert detail[1].split()[-6:] == ["min", "max", "mean", "std", "nan", "inf"]
        assert _rows("\n".join(detail))["keys"][:6] == ["(1,", "2,", "7,", "16)", "f32", "cpu"]

        history = s.run("kv --history").splitlines()
        assert history[:2] == ["kv history: 1 stop, 1 cache", "DynamicCache (outputs.cache): seq 7"]
        assert s.run("help kv").startswith("kv [EXPR] [LAYER] [--stats] [--history]")
        rest = s.finish("c")
    assert "done" in rest and s.exitstatus == 0


def test_kv_inside_the_mlp_during_generate_finds_the_decoder_layers_cache():
    """The path line says `cache DynamicCache len 7` inside LlamaMLP.forward; `kv` shows that cache and its frame."""
    with PtySession(["-m", "llmpdb", "examples/infer.py"]) as s:
        s.wait_prompt()
        s.run("c")
        s.run("c")
        s.run("c")  # stop 3, after model(**inputs); generate() comes next
        assert s.run("bm layers.0.mlp").startswith("module breakpoint 1:")
        stop = s.run("c")
        assert "generate(), no labels, cache DynamicCache len 7" in stop and "(LlamaMLP)" in stop
        lines = s.run("kv").splitlines()
        assert lines[0].startswith("cache from LlamaDecoderLayer.forward (frame ") and lines[0].endswith("): cache")
        assert lines[1].startswith("cache: DynamicCache  2 layers  seq 7 (filled)  kv heads 2 / q heads 4 (GQA ×2)")
        number = lines[0].split("(frame ")[1].split(")")[0]
        s.run(f"frame {number}")
        assert s.run("p type(self).__name__").strip() == "'LlamaDecoderLayer'"
        s.run("clear-module all")
        rest = s.finish("c")
    assert "done" in rest and s.exitstatus == 0
