"""Model-aware navigation typed into a real terminal: examples/infer.py and examples/train.py."""

from __future__ import annotations

import re

import pytest

from .pty_session import PtySession

pytestmark = pytest.mark.timeout(120)


def _module_rows(table: str) -> dict[str, tuple[int, str]]:
    """stack-model rows by module name: (pdb frame number, class)."""
    rows = {}
    for line in table.splitlines():
        match = re.match(r"^ *>?#(\d+)  (\S+)\s+(\S+)\s+modeling_llama\.py:\d+", line)
        if match:
            rows[match.group(2)] = (int(match.group(1)), match.group(3))
    return rows


def test_break_module_condition_stops_once_per_prefill_and_stack_model():
    with PtySession(["-m", "llmpdb", "examples/infer.py"]) as s:
        s.wait_prompt()
        s.run("c")
        s.run("c")  # stop 2, at the model call
        armed = s.run("break-module model.layers.1.self_attn if hidden_states.shape[1] > 1")
        assert armed.strip() == ("module breakpoint 1: model.layers.1.self_attn if hidden_states.shape[1] > 1 "
                                 "-> model.layers.1.self_attn")

        stop = s.run("c")  # model(**inputs): a prefill of 7 tokens
        assert "module breakpoint 1: model.layers.1.self_attn (LlamaAttention), hit 1" in stop
        assert "modeling_llama.py" in stop and "forward()" in stop
        assert ("path: eval, no_grad, no labels, cache DynamicCache len 7, attn sdpa "
                "| model.layers.1.self_attn (LlamaAttention)") in stop
        assert s.run("p hidden_states.shape").strip() == "torch.Size([1, 7, 64])"

        table = s.run("stack-model")
        rows = _module_rows(table)
        assert {name: cls for name, (_, cls) in rows.items()} == {
            "(root)": "LlamaForCausalLM", "model": "LlamaModel", "model.layers.1": "LlamaDecoderLayer",
            "model.layers.1.self_attn": "LlamaAttention"}
        assert "main()" in table and "_call_impl" not in table and "plumbing frames hidden" in table
        assert "_call_impl()" in s.run("sm --all")
        # stack-model's numbers are pdb's: `up` by the difference reaches the decoder layer's frame
        s.run(f"up {rows['model.layers.1.self_attn'][0] - rows['model.layers.1'][0]}")
        assert s.run("p type(self).__name__, self.self_attn.layer_idx").strip() == "('LlamaDecoderLayer', 1)"

        assert "logits = outputs.logits" in s.run("c")  # stop 3, after the call
        prefill = s.run("c")  # generate(): its prefill stops, the one-token steps do not
        assert "module breakpoint 1: model.layers.1.self_attn (LlamaAttention), hit 2" in prefill
        assert ("path: eval, no_grad, generate(), no labels, cache DynamicCache len 7, attn sdpa "
                "| model.layers.1.self_attn (LlamaAttention)") in " ".join(prefill.split())  # wrapped to the width
        listing = s.run("bm").splitlines()
        assert listing[1].split()[-3:] == ["2", "2", "2"]  # calls, hits, stops so far
        rest = s.finish("c")
    assert "module breakpoint" not in rest and "done" in rest and s.exitstatus == 0


def test_after_two_stops_at_the_third_call():
    with PtySession(["-m", "llmpdb", "examples/infer.py"]) as s:
        s.wait_prompt()
        s.run("c")
        s.run("c")
        assert s.run("bm LlamaAttention --after 2").strip() == (
            "module breakpoint 1: LlamaAttention, after 2 -> model.layers.0.self_attn, model.layers.1.self_attn")
        assert "logits = outputs.logits" in s.run("c")  # calls 1 and 2 (the model call) were skipped
        third = s.run("c")
        assert "module breakpoint 1: model.layers.0.self_attn (LlamaAttention), hit 3" in third
        assert "generate()" in third
        assert s.run("p hidden_states.shape[1]").strip() == "7"
        assert s.run("clear-module all").strip() == "cleared 1 module breakpoint"
        rest = s.finish("c")
    assert "done" in rest and s.exitstatus == 0


def test_training_path_header_and_where_forward():
    with PtySession(["-m", "llmpdb", "examples/train.py"]) as s:
        s.wait_prompt()
        armed = s.run("bm LlamaDecoderLayer --once")  # before the model exists: armed as it is built
        assert armed.strip() == ("module breakpoint 1: LlamaDecoderLayer, once -> no module yet: armed on "
                                 "LlamaDecoderLayer modules as they are created")
        stop = s.run("c")
        assert "module breakpoint 1: model.layers.0 (LlamaDecoderLayer), hit 1 (once: now removed)" in stop
        assert "path: train, grad, labels, no cache, attn sdpa | model.layers.0 (LlamaDecoderLayer)" in stop
        table = s.run("sm")
        assert table.splitlines()[0] == ("path: train, grad, labels, no cache, attn sdpa "
                                         "| model.layers.0 (LlamaDecoderLayer)")
        assert list(_module_rows(table)) == ["(root)", "model", "model.layers.0"]
        where = s.run("wf").strip()
        assert re.fullmatch(r"LlamaDecoderLayer\.forward /\S+/modeling_llama\.py:\d+ "
                            r"\(through forward_with_checkpointing, deprecate_kwarg\)", " ".join(where.split())), where

        stop1 = s.run("c")  # the script's own breakpoint, before backward: no forward on the stack
        assert "loss.backward()" in stop1 and "path:" not in stop1
        assert s.run("root-model model").strip() == ("root-model: model = LlamaForCausalLM; "
                                                     "names are relative to LlamaForCausalLM")
        assert s.run("sm").splitlines()[0] == ("path: train, grad, attn sdpa | model LlamaForCausalLM "
                                               "(not in a forward)")
        s.run("c")  # stop 2, before torch.save
        rest = s.finish("c")
    assert "done" in rest and s.exitstatus == 0


def test_module_breakpoint_set_at_the_first_line_is_pending_until_the_model_runs():
    with PtySession(["-m", "llmpdb", "examples/infer.py"]) as s:
        s.wait_prompt()  # the script's first line: torch is not imported, no model exists
        assert s.run("bm layers.1.self_attn").strip() == (
            "module breakpoint 1: layers.1.self_attn -> pending: arms on the first model whose forward runs")
        listing = s.run("b")
        assert [line.split()[-4] for line in listing.splitlines() if "layers.1.self_attn" in line] == ["pending"]
        s.run("c")  # the script's own breakpoint() stops come first
        s.run("c")
        stop = s.run("c")  # model(**inputs): the model's first forward arms and stops the pending breakpoint
        assert "module breakpoint 1: model.layers.1.self_attn (LlamaAttention), hit 1" in stop
        assert ("llmpdb: module breakpoint 1: layers.1.self_attn was pending; armed on model.layers.1.self_attn "
                "when LlamaForCausalLM's forward ran") in stop
        assert "| model.layers.1.self_attn (LlamaAttention)" in stop
        assert s.run("p type(self).__qualname__, self.layer_idx").strip() == "('LlamaAttention', 1)"
        assert s.run("clear-module all").strip() == "cleared 1 module breakpoint"
        assert "logits = outputs.logits" in s.run("c")  # the script's third breakpoint()
        rest = s.finish("c")
    assert "module breakpoint" not in rest and "done" in rest and s.exitstatus == 0


def test_root_model_is_the_documented_name_and_model_says_why_it_exists():
    with PtySession(["-m", "llmpdb", "examples/infer.py"]) as s:
        s.wait_prompt()
        root_help = s.run("help root-model").strip().splitlines()
        assert root_help[0] == "root-model [EXPR | --auto]"
        alias_help = " ".join(s.run("help model").split())
        assert alias_help.startswith("model [EXPR | --auto] The short name of root-model")
        assert "under pdb++ a local named `model` is printed instead of running this command; use root-model" \
            in alias_help
        s.run("c")
        assert s.run("root-model").strip() == ("root-model: LlamaForCausalLM (found among the current "
                                               "frame's variables)")
        s.run("c")
        s.run("c")
        rest = s.finish("c")
    assert "done" in rest and s.exitstatus == 0
