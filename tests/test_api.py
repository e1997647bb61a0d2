"""The Python API (llmpdb/api.py): ``llmpdb.shapes/stack_model/kv/statediff`` print like the commands and
return the records; from a plain script and from IPython (as a notebook or debug console calls them)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import llmpdb
from llmpdb.inspect.kv import CacheReport
from llmpdb.inspect.statediff import StateDiff
from llmpdb.inspect.tensors import TensorWalk

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(ROOT, "tests")

SCRIPT = textwrap.dedent("""
    import sys
    sys.path.append(sys.argv[-1])  # tests/ last: tests/inspect/ must not shadow the standard inspect
    import torch
    import llmpdb
    from tiny_models import plain_model, tiny_llama

    model = tiny_llama()
    ids = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        outputs = model(ids, use_cache=True)

    walk = llmpdb.shapes(outputs)
    print("RETURNED", type(walk).__name__, len(walk), walk[0].path)
    report = llmpdb.kv()
    print("RETURNED", type(report).__name__, report.seq)

    class Probe(torch.nn.Module):
        def forward(self, x):
            return llmpdb.stack_model()

    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.probe = Probe()

        def forward(self, x):
            return self.probe(x)

    entries = Outer()(ids)
    print("RETURNED", type(entries).__name__, len(entries) > 2)
    state = model.state_dict()
    state.pop("lm_head.weight")
    diff = llmpdb.statediff(model, state)
    print("RETURNED", type(diff).__name__)
    try:
        llmpdb.kv(3)
    except ValueError as exc:
        print("ERROR", exc)
""")


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": ROOT, "NO_COLOR": "1", "COLUMNS": "100",
            "TRANSFORMERS_VERBOSITY": "error"}


def _check_output(out: str) -> None:
    assert "outputs.logits                  (1, 3, 256)    f32    3.0 KiB" in out
    assert "RETURNED TensorWalk 5 outputs.logits" in out
    assert "outputs.cache: DynamicCache  2 layers  seq 3 (filled)  kv heads 2 / q heads 4 (GQA ×2)" in out
    assert "RETURNED CacheReport 3" in out
    rows = [line.split() for line in out.splitlines()]
    assert "path: train, grad | probe (Probe)" in out
    current = [row[1:3] for row in rows if row and row[0].startswith(">#")]
    assert current == [["probe", "Probe"]]  # the caller's frame is the current one
    assert ["(root)", "Outer"] in [row[1:3] for row in rows if row and row[0].startswith("#")]
    assert "RETURNED list True" in out
    assert "statediff model ↔ state (state dict, 20 tensors)" in out
    assert "lm_head.weight" in out
    assert "RETURNED StateDiff" in out
    assert "ERROR cache is a int, not a KV cache" in out


def test_api_from_a_plain_script(tmp_path):
    script = tmp_path / "console.py"
    script.write_text(SCRIPT)
    result = subprocess.run([sys.executable, str(script), TESTS], env=_env(), cwd=tmp_path, capture_output=True,
                            text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    _check_output(result.stdout)


def test_api_from_ipython(tmp_path):
    pytest.importorskip("IPython", reason="IPython is not installed for this Python")
    script = tmp_path / "cell.ipy"
    script.write_text(SCRIPT)
    result = subprocess.run([sys.executable, "-m", "IPython", "--quick", "--no-banner", "--colors=NoColor",
                             "--HistoryManager.enabled=False", str(script), TESTS], env=_env(), cwd=tmp_path,
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    _check_output(result.stdout)


def test_the_caller_frame_is_where_they_look(capsys):
    import torch

    hidden_states = torch.zeros(2, 5, 8)
    walk = llmpdb.shapes()
    assert [info.path for info in walk] == ["hidden_states"]
    assert "hidden_states  (2, 5, 8)" in capsys.readouterr().out


def test_show_false_returns_the_same_records_silently(capsys):
    import torch
    from llmpdb.inspect.tensors import shapes as inspect_shapes

    x = {"a": torch.ones(3)}
    quiet = llmpdb.shapes(x, show=False)
    assert capsys.readouterr().out == ""
    assert isinstance(quiet, TensorWalk)
    assert [(i.path, i.shape) for i in quiet] == [(i.path, i.shape) for i in inspect_shapes(x)]
    assert isinstance(llmpdb.kv(((torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4)),), show=False), CacheReport)
    assert isinstance(llmpdb.statediff({"w": torch.ones(2)}, {"w": torch.ones(2)}, show=False), StateDiff)
    assert capsys.readouterr().out == ""


def test_no_cache_is_a_clear_error():
    nothing = 1
    with pytest.raises(ValueError, match="no KV cache in the caller's frame"):
        llmpdb.kv()
    assert nothing == 1


def test_grads_and_tokens_from_a_notebook_cell_return_the_records(capsys):
    """The Python API covers what a notebook user asks at a stop: gradients after backward, the tokens of a
    batch; each prints the command's table and returns its record, checked here against torch itself."""
    import os
    import sys

    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import tiny

    tokenizer = tiny.build_tokenizer()
    model = tiny.build_model(tokenizer=tokenizer)
    batch = tokenizer(["hello world", "hi"], return_tensors="pt", padding=True)
    model.model.layers[0].mlp.requires_grad_(False)
    model(**batch, labels=batch["input_ids"]).loss.backward()

    report = llmpdb.grads(model)
    printed = capsys.readouterr().out
    expected = {name: p.grad.norm().item() for name, p in model.named_parameters() if p.grad is not None}
    got = {p.name: p.norm for _, params in report.groups for p in params if p.norm is not None}
    assert got.keys() == expected.keys()
    assert all(abs(got[k] - expected[k]) <= 1e-5 * max(1.0, expected[k]) for k in expected)
    assert "frozen" in printed and "model.layers.0" in printed

    inputs = batch
    tok = tokenizer
    tokens_report = llmpdb.tokens()  # the caller's inputs and tokenizer, found by type
    printed = capsys.readouterr().out
    assert [s.length for s in tokens_report.sequences] == [len(r) for r in inputs["input_ids"].tolist()]
    assert tokenizer.padding_side in printed and "pad" in printed
    assert llmpdb.tokens(inputs, tok, show=False) is not None and capsys.readouterr().out == ""
    with pytest.raises(TypeError, match="a torch module is needed, not a BatchEncoding"):
        llmpdb.grads(inputs)
