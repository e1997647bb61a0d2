"""The ``statediff`` command, typed into a real llmpdb debugger (tests/transcript.py)."""

from __future__ import annotations

import re

import pytest
import torch
from tiny_models import tiny_llama
from transcript import debug_transcript

from llmpdb.session import SESSION

PROMPT = "(llmpdb) "


class Evil:
    def __reduce__(self):
        return (print, ("EXECUTED",))


@pytest.fixture(autouse=True)
def fresh_session(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    SESSION.reset()
    yield
    SESSION.reset()


def train(path):
    model = tiny_llama().train()
    model.model.layers[0].requires_grad_(False)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    torch.save({"model_state_dict": model.state_dict(), "step": 0}, path)
    torch.save({"w": torch.zeros(1), "payload": Evil()}, "evil.pt")
    other = tiny_llama(num_hidden_layers=1)
    where = path
    breakpoint()  # stop 2
    torch.manual_seed(1)
    ids = torch.randint(0, 256, (2, 8))
    model(ids, labels=ids).loss.backward()
    optimizer.step()
    breakpoint()  # stop 3
    return other, where


def replies(out: str) -> list[str]:
    """What each typed command printed (the text between prompts)."""
    return [chunk.rstrip("\n") for chunk in out.split(PROMPT)[1:]]


def test_model_against_checkpoint_path_and_expression():
    out = debug_transcript(train, [
        "c",
        "statediff model ckpt.pt",
        "statediff model other",
        "statediff model where",
        "statediff model {'module.' + k: v for k, v in model.state_dict().items()}",
        "statediff model 'ckpt.pt'",
        "c",
    ], "ckpt.pt")
    got = replies(out)
    assert got[1] == (
        "statediff model ↔ ckpt.pt (pickle, 1 file, 21 tensors, under `model_state_dict`)\n"
        "21/21 model tensors match in name, shape and dtype")
    assert got[2] == (
        "statediff model ↔ other (module, 12 tensors)\n"
        "12/21 model tensors match in name, shape and dtype\n"
        "missing: 9 in the model, not in the other\n"
        "  model.layers.1.* (9)")
    assert got[3] == got[1]  # a variable holding the path
    assert got[4] == (
        "statediff model ↔ {'module.' + k: v for k, v in model.state_dict().items()} (state dict, 21 tensors)\n"
        "strip `module.` → 21/21 match (0/21 as saved)\n"
        "21/21 model tensors match in name, shape and dtype")
    assert got[5] == got[1]  # a quoted path


def test_snapshot_then_compare_at_a_later_stop():
    out = debug_transcript(train, [
        "c",
        "statediff snap before",
        "c",
        "statediff",
        "statediff snap after",
        "statediff before after",
        "statediff --list",
        "statediff --drop before",
        "statediff --list",
        "c",
    ], "ckpt.pt")
    got = replies(out)
    assert got[1] == "snapshot before of model (LlamaForCausalLM) at stop 2: 23 tensors, 0 grads, fingerprints"
    compare = (
        "changed: 12 (relative L2 change, estimated from strided samples; --exact for exact values)\n"
        "  model.embed_tokens.weight  1.2e-02\n"
        "  model.layers.1.* (9)       1.0e-03…5.3e-02\n"
        "  model.norm.weight          1.0e-03\n"
        "  lm_head.weight             5.4e-02\n"
        "unchanged: 11\n"
        "  model.layers.0.* (9)    frozen (requires_grad=False)\n"
        "  model.rotary_emb.* (2)  buffer\n"
        "grads: 12 appeared")
    assert got[3] == (
        "statediff before (stop 2) → now (stop 3): LlamaForCausalLM, 23 tensors: 12 changed, 11 unchanged, "
        "0 became NaN/Inf\n" + compare)
    assert got[4] == "snapshot after of model (LlamaForCausalLM) at stop 3: 23 tensors, 12 grads, fingerprints"
    assert got[5] == (
        "statediff before (stop 2) → after (stop 3): LlamaForCausalLM, 23 tensors: 12 changed, 11 unchanged, "
        "0 became NaN/Inf\n" + compare)
    assert got[6] == (
        "  before of model (LlamaForCausalLM) at stop 2: 23 tensors, 0 grads, fingerprints\n"
        "* after of model (LlamaForCausalLM) at stop 3: 23 tensors, 12 grads, fingerprints")
    assert got[7] == "dropped snapshot before"
    assert got[8] == "* after of model (LlamaForCausalLM) at stop 3: 23 tensors, 12 grads, fingerprints"


def test_snapshot_survives_a_new_debugger_and_exact_mode():
    from llmpdb.commands.statediff import snapshots

    keep = {}

    def first():
        model = keep["model"] = tiny_llama()
        breakpoint()
        return model

    def later():
        with torch.no_grad():
            keep["model"].lm_head.weight.mul_(2.0)
        breakpoint()

    debug_transcript(first, ["c", "statediff snap w0 --exact", "c"])
    assert list(snapshots()) == ["w0"] and snapshots()["w0"].mode == "exact"
    got = replies(debug_transcript(later, ["c", "statediff w0", "c"]))  # a new debugger, same process
    lines = got[1].splitlines()
    assert re.fullmatch(r"statediff w0 \(stop 2\) → now \(stop \d+\): LlamaForCausalLM, 23 tensors: 1 changed, "
                        r"22 unchanged, 0 became NaN/Inf", lines[0])
    assert lines[1:3] == [
        "changed: 1 (relative L2 change)",
        "  lm_head.weight  1.0e+00",
    ]

    snapshots()["w0"].model_ref = None  # the model is gone: the expression is evaluated in the frame instead
    got = replies(debug_transcript(lambda: breakpoint(), ["c", "statediff", "c"]))
    assert got[1] == "*** statediff: the model of snapshot w0 (model) is gone and not found here"

    def elsewhere():
        model = keep["model"]
        breakpoint()
        return model

    got = replies(debug_transcript(elsewhere, ["c", "statediff", "c"]))
    assert got[1].splitlines()[1:3] == lines[1:3]


def test_errors_are_one_line_and_nothing_executes(capsys):
    out = debug_transcript(train, [
        "c",
        "statediff",
        "statediff model evil.pt",
        "statediff nope",
        "statediff model nothing_here",
        "statediff model ckpt.pt --bogus",
        "statediff model step",
        "statediff snap x y z",
        "c",
        "c",
    ], "ckpt.pt")
    got = replies(out)
    assert got[1] == "*** statediff: no snapshot yet: `statediff snap [NAME] [MODEL]` at an earlier stop"
    assert got[2] == (
        "*** statediff: evil.pt: refused: unpickling needs the global `print`, which could run code; "
        "if you trust this file, pass --unsafe-trusted (statediff(..., unsafe_trusted=True)) "
        "or call torch.serialization.add_safe_globals([print])")
    assert got[3] == "*** statediff: no snapshot yet: `statediff snap [NAME] [MODEL]` at an earlier stop"
    assert got[4] == (
        "*** statediff: nothing_here: no such file or folder, and not an expression "
        "(cannot evaluate 'nothing_here': NameError: name 'nothing_here' is not defined)")
    assert got[5] == "*** statediff: unknown option --bogus (options: --all, --drop, --exact, --list, --unsafe-trusted)"
    assert got[6].startswith("*** statediff: step: no such file or folder, and not an expression")
    assert got[7] == "*** statediff: usage: statediff snap [NAME] [MODEL] [--exact]"
    assert "EXECUTED" not in out and "EXECUTED" not in capsys.readouterr().out


def test_help_starts_with_the_usage():
    out = debug_transcript(lambda: None, ["help statediff", "c"])
    assert replies(out)[0].splitlines()[0] == (
        "statediff MODEL CHECKPOINT | MODEL EXPR2 | snap [NAME] [MODEL] [--exact] | [NAME [NAME2]] [--all]")
