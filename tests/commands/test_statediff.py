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

    snapshots()["w0"].model_ref = None  # the model is gone: `model` is not evaluated again, here or there
    gone = ("*** statediff: the LlamaForCausalLM snapped as w0 (model) no longer exists; statediff compares the "
            "object snapped and does not evaluate `model` again")
    got = replies(debug_transcript(lambda: breakpoint(), ["c", "statediff", "c"]))
    assert got[1] == gone

    def elsewhere():
        model = keep["model"]
        breakpoint()
        return model

    got = replies(debug_transcript(elsewhere, ["c", "statediff", "c"]))
    assert got[1] == gone


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
    assert got[2] == "*** statediff: evil.pt: refused: this pickle would run code (print); `--unsafe-trusted` loads it"
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


def test_a_snapshot_of_a_call_is_compared_with_that_object_never_a_new_call():
    def script():
        calls = []

        def mk_model():
            calls.append(1)
            return tiny_llama()

        breakpoint()
        return calls

    got = replies(debug_transcript(script, [
        "c", "statediff snap s1 mk_model()", "!__import__('gc').collect()", "statediff s1", "p len(calls)", "c"]))
    got = got[:2] + got[3:]  # the gc pass (a model's reference cycles outlive it until one runs) prints a count
    assert got[1] == "snapshot s1 of mk_model() (LlamaForCausalLM) at stop 2: 23 tensors, 0 grads, fingerprints"
    assert got[2] == ("*** statediff: the LlamaForCausalLM snapped as s1 (mk_model()) no longer exists; statediff "
                      "compares the object snapped and does not evaluate `mk_model()` again")
    assert got[3] == "1"  # mk_model() ran once: for the snapshot


def test_snapshots_kept_are_capped_and_the_dropped_are_named(monkeypatch):
    monkeypatch.setenv("LLMPDB_SNAPSHOT_LIMIT", "2")

    def script():
        model = tiny_llama()
        breakpoint()
        return model

    got = replies(debug_transcript(script, [
        "c", "statediff snap a", "statediff snap b", "statediff snap c", "statediff --list", "c"]))
    assert got[3] == (
        "snapshot c of model (LlamaForCausalLM) at stop 2: 23 tensors, 0 grads, fingerprints\n"
        "dropped the oldest 1 snapshot: a (2 kept, at most 2 (LLMPDB_SNAPSHOT_LIMIT) and 4.0 GiB "
        "(LLMPDB_SNAPSHOT_MIB))")
    assert got[4] == (
        "  b of model (LlamaForCausalLM) at stop 2: 23 tensors, 0 grads, fingerprints\n"
        "* c of model (LlamaForCausalLM) at stop 2: 23 tensors, 0 grads, fingerprints")
    monkeypatch.setenv("LLMPDB_SNAPSHOT_LIMIT", "many")
    got = replies(debug_transcript(script, ["c", "statediff snap d", "c"]))
    assert got[1].splitlines()[1:] == ["note: LLMPDB_SNAPSHOT_LIMIT='many' is not a positive whole number; using 16"]


def test_drop_names_the_snapshots_that_exist():
    def script():
        model = tiny_llama()
        breakpoint()
        return model

    got = replies(debug_transcript(script, [
        "c", "statediff snap", "statediff --drop stop3", "statediff --drop", "statediff stop9 stop2",
        "statediff --drop stop2", "c"]))
    assert got[2] == "*** statediff: no snapshot named stop3 (snapshots: stop2); nothing dropped"
    assert got[3] == "*** statediff: --drop needs a snapshot name (snapshots: stop2)"
    assert got[4] == "*** statediff: no snapshot named stop9 (snapshots: stop2)"
    assert got[5] == "dropped snapshot stop2"


def test_a_model_whose_own_code_raises_is_one_line_not_an_internal_error():
    class Broken(torch.nn.Module):
        def named_parameters(self, *args, **kwargs):
            raise RuntimeError("boom")

    def script():
        broken = Broken()
        breakpoint()
        return broken

    got = replies(debug_transcript(script, ["c", "statediff snap s broken", "c"]))
    assert got[1] == "*** statediff: broken: reading its tensors raised RuntimeError: boom"


class Recorder:
    """A local that records every attribute the debugger reads (and whose __class__ is a property)."""

    seen: list = []

    @property
    def __class__(self):
        Recorder.seen.append("__class__")
        return dict

    def __getattr__(self, name):
        Recorder.seen.append(name)
        raise AttributeError(name)


def test_a_hostile_object_is_told_apart_by_its_type():
    def script():
        model = tiny_llama()
        spy = Recorder()
        breakpoint()
        return model, spy

    got = replies(debug_transcript(script, [  # cleared after the stop's own notes (not statediff's) ran
        "c", "!Recorder.seen.clear()", "statediff model spy", "statediff snap s spy", "statediff model {'w': spy}",
        "p Recorder.seen", "c"]))
    assert got[2] == "*** statediff: spy is a Recorder: expected a path, a module or a state dict"
    assert got[3] == "*** statediff: spy is a Recorder, not a module"
    assert got[4].startswith("*** statediff: ")
    assert got[5] == "[]"


@pytest.mark.timeout(60)  # a reader that opens the FIFO blocks: the timeout fails the test
def test_hostile_checkpoints_are_refused_in_one_line_each(tmp_path):
    import json
    import os
    import zipfile

    with zipfile.ZipFile("bomb.pt", "w", compression=zipfile.ZIP_DEFLATED) as zf:
        with zf.open("archive/data.pkl", "w") as member:
            for _ in range(64):
                member.write(bytes(2**20))
    os.mkfifo("pipe.pt")

    class Shell:
        def __reduce__(self):
            return (os.system, ("touch pwned",))

    torch.save({"w": torch.zeros(1), "payload": Shell()}, "shell.pt")
    os.mkdir("escape")
    with open("escape/pytorch_model.bin.index.json", "w") as fh:
        json.dump({"weight_map": {"w": "../../../etc/passwd"}}, fh)

    def script():
        model = tiny_llama()
        breakpoint()
        return model

    got = replies(debug_transcript(script, [
        "c", "statediff model bomb.pt", "statediff model pipe.pt", "statediff model shell.pt",
        "statediff model escape", "statediff model escape --unsafe-trusted", "c"]))
    assert re.fullmatch(r"\*\*\* statediff: bomb.pt: refused: archive/data.pkl inflates to 64.0 MiB from \d+\.\d KiB "
                        r"\(\d+×\): a zip bomb; torch.save never compresses", got[1])
    assert got[2] == ("*** statediff: pipe.pt: refused: a FIFO (named pipe), not a regular file (reading it could "
                      "block forever)")
    assert got[3] == ("*** statediff: shell.pt: refused: this pickle would run code (os.system); `--unsafe-trusted` "
                      "loads it")
    escape = ("*** statediff: pytorch_model.bin.index.json: refused: shard '../../../etc/passwd' is outside the "
              "checkpoint's folder")
    assert got[4] == escape and got[5] == escape
    assert not os.path.exists("pwned")


def meta_model_stop(path):
    from tiny_models import LLAMA_DIMS
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.save(tiny_llama().state_dict(), path)
    with torch.device("meta"):
        model = LlamaForCausalLM(LlamaConfig(**LLAMA_DIMS))
    breakpoint()
    return model


def test_a_meta_model_is_never_reported_as_matching_values():
    out = debug_transcript(meta_model_stop, ["c", "statediff model ckpt.pt", "statediff snap a",
                                             "statediff a", "c"], "ckpt.pt")
    got = replies(out)
    assert "21/21 model tensors match in name, shape and dtype" in got[1]
    assert "meta: values unknown for 21 tensors of model on the meta device (model.embed_tokens.weight…)" \
        in " ".join(got[1].split())
    assert got[3].startswith("statediff a (stop 2) → now (stop 2): LlamaForCausalLM, 0 tensors: 0 changed, "
                             "0 unchanged")
    assert "not compared: 23 (meta tensor (no values)" in got[3]
