"""Tests of examples/: tiny.py's tokenizer and model, then infer.py and train.py.

Each script runs twice: as a subprocess from a directory outside the repo, with ``PYTHONBREAKPOINT``
set to a recorder that logs every ``breakpoint()`` (caller line, locals' names and types), which proves
where the stops are and what the docs may promise is visible there; and in this process with
``PYTHONBREAKPOINT=0``, which must print the same.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import runpy
import subprocess
import sys
import tempfile
import textwrap

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
INFER = os.path.join(EXAMPLES, "infer.py")
TRAIN = os.path.join(EXAMPLES, "train.py")

RECORDER = textwrap.dedent(
    """
    import json, os, sys

    def hook(*args, **kwargs):
        frame = sys._getframe(1)  # breakpoint() and sys.breakpointhook are C: frame 1 is the caller
        record = {
            "file": os.path.basename(frame.f_code.co_filename),
            "line": frame.f_lineno,
            "function": frame.f_code.co_name,
            "types": {name: type(value).__name__ for name, value in frame.f_locals.items()},
            "ints": {name: value for name, value in frame.f_locals.items() if type(value) is int},
        }
        with open(os.environ["BREAKPOINT_LOG"], "a", encoding="utf-8") as log:
            log.write(json.dumps(record) + "\\n")
    """
)


def _load_tiny():
    spec = importlib.util.spec_from_file_location("examples_tiny", os.path.join(EXAMPLES, "tiny.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tiny = _load_tiny()


def _breakpoint_lines(path: str) -> list[int]:
    """Line numbers of the ``breakpoint()`` calls in a script, in source order."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    calls = [node for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "breakpoint"]
    return sorted(node.lineno for node in calls)


def _source_line(path: str, lineno: int) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read().splitlines()[lineno - 1]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Both scripts as subprocesses under the breakpoint recorder, started together, run from a directory
    outside the repo: {name: (returncode, stdout, stderr, log path)}; train.py writes to ``ckpt/``."""
    base = tmp_path_factory.mktemp("examples")
    (base / "bp_recorder.py").write_text(RECORDER, encoding="utf-8")
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false", TRANSFORMERS_VERBOSITY="error",
               PYTHONBREAKPOINT="bp_recorder.hook", PYTHONPATH=str(base))
    (base / "ckpt").mkdir()
    jobs = {"infer": [INFER], "train": [TRAIN, str(base / "ckpt")]}
    procs = {name: subprocess.Popen([sys.executable, *args], cwd=str(base), text=True,
                                    env=dict(env, BREAKPOINT_LOG=str(base / f"{name}.jsonl")),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for name, args in jobs.items()}
    results = {}
    for name, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        results[name] = (proc.returncode, out, err, base / f"{name}.jsonl")
    results["ckpt"] = base / "ckpt"
    return results


def _run_in_process(monkeypatch, capsys, path: str, argv: list[str] | None = None) -> str:
    """Run a script's ``main()`` (``main(argv)`` when argv is given) in this process with
    ``PYTHONBREAKPOINT=0``; return what it printed. The script's ``sys.path`` insertion and its ``tiny``
    import are undone afterwards."""
    monkeypatch.setenv("PYTHONBREAKPOINT", "0")
    monkeypatch.setattr(sys, "breakpointhook", sys.__breakpointhook__)
    monkeypatch.setattr(sys, "path", list(sys.path))
    had_tiny = "tiny" in sys.modules
    try:
        namespace = runpy.run_path(path, run_name="example_under_test")
        capsys.readouterr()
        if argv is None:
            namespace["main"]()
        else:
            namespace["main"](argv)
    finally:
        if not had_tiny:
            sys.modules.pop("tiny", None)
    return capsys.readouterr().out


def _records(log) -> list[dict]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


# ---------------------------------------------------------------- tiny.py, in-process


def test_tokenizer_is_a_real_fast_tokenizer():
    from transformers import BatchEncoding, PreTrainedTokenizerFast

    tokenizer = tiny.build_tokenizer()
    assert isinstance(tokenizer, PreTrainedTokenizerFast)
    inputs = tokenizer("Hello world", return_tensors="pt")
    assert isinstance(inputs, BatchEncoding)
    assert list(inputs.keys()) == ["input_ids", "attention_mask"]
    assert inputs["input_ids"].dtype == torch.int64
    assert inputs["input_ids"].shape == inputs["attention_mask"].shape == (1, 7)
    assert inputs["input_ids"][0, 0].item() == tokenizer.bos_token_id
    assert inputs["attention_mask"].sum().item() == 7


def test_tokenizer_special_ids_and_size():
    tokenizer = tiny.build_tokenizer()
    ids = (tokenizer.unk_token_id, tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id)
    assert ids == (0, 1, 2, 3)
    assert tokenizer.convert_ids_to_tokens([0, 1, 2, 3]) == tiny.SPECIAL_TOKENS
    assert len(tokenizer) == 384


@pytest.mark.parametrize("text", tiny.CORPUS[:3] + ["Grüße, 世界! tabs\tand  spaces", "unseen zygote xylophone"])
def test_tokenizer_round_trip(text):
    tokenizer = tiny.build_tokenizer()
    ids = tokenizer(text)["input_ids"]
    assert ids[0] == tokenizer.bos_token_id
    assert tokenizer.decode(ids, skip_special_tokens=True) == text
    assert tokenizer.decode(ids) == "<s>" + text


def test_tokenizer_is_deterministic_and_learnt_merges():
    first, second = tiny.build_tokenizer(), tiny.build_tokenizer()
    assert first.backend_tokenizer.to_str() == second.backend_tokenizer.to_str()
    ids = first(tiny.CORPUS[4])["input_ids"]
    assert ids == second(tiny.CORPUS[4])["input_ids"]
    # trained merges: a corpus sentence takes far fewer tokens than its bytes
    assert len(ids) < len(tiny.CORPUS[4].encode()) // 2


def test_tokenizer_pads_on_the_left_for_generation():
    tokenizer = tiny.build_tokenizer()
    batch = tokenizer(["Hello world", tiny.CORPUS[0]], padding=True, return_tensors="pt")
    short = len(tokenizer("Hello world")["input_ids"])
    width = batch["input_ids"].shape[1]
    assert width > short
    assert batch["input_ids"][0, : width - short].tolist() == [tokenizer.pad_token_id] * (width - short)
    assert batch["attention_mask"][0].tolist() == [0] * (width - short) + [1] * short


def test_model_is_a_tiny_gqa_llama():
    from transformers import LlamaForCausalLM

    tokenizer = tiny.build_tokenizer()
    model = tiny.build_model(seed=0, tokenizer=tokenizer)
    config = model.config
    assert isinstance(model, LlamaForCausalLM) and not model.training
    assert (config.num_attention_heads, config.num_key_value_heads, config.head_dim) == (4, 2, 16)
    assert (config.hidden_size, config.num_hidden_layers, config.intermediate_size) == (64, 2, 128)
    assert config.vocab_size == len(tokenizer)
    assert (config.bos_token_id, config.eos_token_id, config.pad_token_id) == (1, 2, 3)
    attention = model.model.layers[0].self_attn
    assert attention.q_proj.out_features == 4 * 16
    assert attention.k_proj.out_features == attention.v_proj.out_features == 2 * 16
    assert model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr()  # not tied


def test_model_seed_fixes_the_weights():
    first, second, other = tiny.build_model(seed=0), tiny.build_model(seed=0), tiny.build_model(seed=1)
    for name, tensor in first.state_dict().items():
        assert torch.equal(tensor, second.state_dict()[name]), name
    assert not torch.equal(first.model.layers[0].self_attn.q_proj.weight, other.model.layers[0].self_attn.q_proj.weight)


# ---------------------------------------------------------------- infer.py


def test_infer_runs_standalone_and_is_deterministic(runs, monkeypatch, capsys):
    code, out, err, _ = runs["infer"]
    assert code == 0, f"exit {code}\nstdout:\n{out}\nstderr:\n{err}"
    assert err == "", err  # no warnings
    assert out.splitlines()[-1] == "done"
    assert re.search(r"^generated: '.+'$", out, re.M), out
    # a second run, in this process with breakpoint() disabled, prints exactly the same
    assert _run_in_process(monkeypatch, capsys, INFER) == out


def test_infer_matches_greedy_generation_computed_here(runs):
    out = runs["infer"][1].splitlines()
    tokenizer = tiny.build_tokenizer()
    model = tiny.build_model(seed=0, tokenizer=tokenizer)
    inputs = tokenizer(tiny.PROMPT, return_tensors="pt")
    with torch.no_grad():
        generated = model.generate(**inputs, max_new_tokens=3, do_sample=False)
    new_ids = generated[0, inputs["input_ids"].shape[1]:].tolist()
    assert len(new_ids) == 3
    assert f"prompt: {tiny.PROMPT!r} -> input_ids {inputs['input_ids'][0].tolist()}" in out
    assert f"new token ids: {new_ids}" in out
    assert f"generated: {tokenizer.decode(generated[0], skip_special_tokens=True)!r}" in out


def test_infer_breakpoints_stop_in_order_with_the_promised_locals(runs):
    assert runs["infer"][0] == 0, runs["infer"][2]
    records = _records(runs["infer"][3])
    lines = _breakpoint_lines(INFER)
    assert len(lines) == 3
    assert [(r["file"], r["function"], r["line"]) for r in records] == [("infer.py", "main", n) for n in lines]
    for number, lineno in enumerate(lines, start=1):
        assert f"# stop {number}," in _source_line(INFER, lineno)
    assert "outputs = model(**inputs)" in _source_line(INFER, lines[1] + 1)
    stop1, stop2, stop3 = (r["types"] for r in records)
    assert stop1["inputs"] == "BatchEncoding" and stop1["model"] == "LlamaForCausalLM"
    assert "outputs" not in stop1 and "outputs" not in stop2
    assert stop2["inputs"] == "BatchEncoding"
    assert stop3["outputs"] == "CausalLMOutputWithPast"
    assert "logits" not in stop3 and "generated_ids" not in stop3


# ---------------------------------------------------------------- train.py


def _losses(out: str) -> list[float]:
    return [float(value) for value in re.findall(r"^step \d+: loss (\d+\.\d+)$", out, re.M)]


def test_train_runs_standalone_and_learns(runs):
    code, out, err, _ = runs["train"]
    assert code == 0, f"exit {code}\nstdout:\n{out}\nstderr:\n{err}"
    assert err == "", err
    assert out.splitlines()[-1] == "done"
    losses = _losses(out)
    assert len(losses) == 3
    assert losses[2] < losses[0]


def test_train_writes_the_checkpoint_where_told(runs):
    out = runs["train"][1]
    path = os.path.join(str(runs["ckpt"]), "checkpoint.pt")
    assert f"saved {path}" in out.splitlines()
    checkpoint = torch.load(path, weights_only=True)
    assert set(checkpoint) == {"model_state_dict", "optimizer_state_dict", "step", "loss"}
    assert checkpoint["step"] == 3
    assert checkpoint["loss"] == pytest.approx(_losses(out)[-1], abs=1e-4)
    start = tiny.build_model(seed=0).state_dict()
    saved = checkpoint["model_state_dict"]
    assert set(saved) == set(start)
    unchanged = sorted(name for name in saved if torch.equal(saved[name], start[name]))
    assert unchanged == ["model.embed_tokens.weight"]  # the frozen embedding, and only it
    assert len(checkpoint["optimizer_state_dict"]["state"]) == len(saved) - 1


def test_train_again_here_defaults_to_a_temporary_directory(runs, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    out = _run_in_process(monkeypatch, capsys, TRAIN, [TRAIN])
    assert out.splitlines()[-1] == "done"
    assert _losses(out) == pytest.approx(_losses(runs["train"][1]), abs=2e-4)  # same losses as the subprocess
    saved = [line[len("saved "):] for line in out.splitlines() if line.startswith("saved ")]
    assert len(saved) == 1
    assert saved[0].startswith(str(tmp_path) + os.sep) and os.path.isfile(saved[0])


def test_train_breakpoints_stop_once_per_place_with_the_promised_locals(runs):
    assert runs["train"][0] == 0, runs["train"][2]
    records = _records(runs["train"][3])
    lines = _breakpoint_lines(TRAIN)
    assert len(lines) == 2
    # the loop's breakpoint fires on the first step only, then the one before torch.save
    assert [(r["file"], r["function"], r["line"]) for r in records] == [("train.py", "main", n) for n in lines]
    for number, lineno in enumerate(lines, start=1):
        assert f"# stop {number}," in _source_line(TRAIN, lineno)
    assert "loss.backward()" in _source_line(TRAIN, lines[0] + 1)
    assert "torch.save(" in _source_line(TRAIN, lines[1] + 1)
    loss_stop, save_stop = records
    assert loss_stop["ints"]["step"] == 0
    for name, kind in [("loss", "Tensor"), ("outputs", "CausalLMOutputWithPast"), ("labels", "Tensor"),
                       ("batch", "BatchEncoding"), ("optimizer", "AdamW"), ("model", "LlamaForCausalLM")]:
        assert loss_stop["types"][name] == kind, name
    assert save_stop["types"]["checkpoint"] == "dict" and save_stop["types"]["path"] == "str"
    assert save_stop["ints"]["step"] == 2
