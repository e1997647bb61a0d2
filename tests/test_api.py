"""The Python API (llmpdb/api.py): ``llmpdb.shapes/stack_model/kv/statediff`` print like the commands and
return the records; from a plain script and from IPython (as a notebook or debug console calls them)."""

from __future__ import annotations

import math
import os
import re
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
    eye = torch.eye(3)
    picture = llmpdb.show(eye)  # a terminal (IPython's included): the text rendering is printed
    print("RETURNED", type(picture).__name__)
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
    assert "eye  f32 (3, 3)  values 0 … 1  (one cell per value)" in out and "RETURNED Picture" in out


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


# ---- trace, mem, show: what a notebook user asks at a stop, each checked against an independent truth ----

def test_trace_records_every_module_call_as_forward_hooks_see_it(capsys):
    """The records of ``llmpdb.trace`` against hooks of our own on the same model and input: the same
    modules, in the order their forwards start, with the output shapes torch returned."""
    import torch
    from tiny_models import tiny_llama

    model = tiny_llama()
    inputs = {"input_ids": torch.tensor([[1, 2, 3, 4]])}
    with torch.no_grad():
        report = llmpdb.trace(model, inputs, fold=False)
    printed = capsys.readouterr().out
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules()), "hooks left behind"

    seen, handles = [], []
    for name, module in model.named_modules():
        def pre(mod, args, kwargs, name=name):
            seen.append([name or "(root)", type(mod).__name__, None])
        def post(mod, args, output, name=name):
            first = output[0] if isinstance(output, tuple) else getattr(output, "logits", None) \
                if name == "" else getattr(output, "last_hidden_state", output)
            row = next(r for r in reversed(seen) if r[0] == (name or "(root)") and r[2] is None)
            row[2] = tuple(first.shape)
        handles += [module.register_forward_pre_hook(pre, with_kwargs=True), module.register_forward_hook(post)]
    with torch.no_grad():
        expected_logits = model(**inputs).logits
    for handle in handles:
        handle.remove()

    assert [(c.path, c.class_name) for c in report.calls] == [(name, cls) for name, cls, _ in seen]
    for call, (_, _, shape) in zip(report.calls, seen):
        first = call.outputs[0].rpartition("=")[2]
        assert first == "(" + ", ".join(map(str, shape)) + ")", (call.path, first, shape)
    assert torch.equal(report.output.logits, expected_logits)
    assert "\n    .layers.1  " in printed and "\n        .q_proj  " in printed and f"{len(seen)} module calls" in printed
    depth_one = llmpdb.trace(model, inputs, depth=1, show=False)
    assert [c.path for c in depth_one.calls] == ["(root)", "model", "lm_head"] and capsys.readouterr().out == ""
    with pytest.raises(ValueError, match="no module matches 'nosuch'"):
        llmpdb.trace(model, inputs, pattern="nosuch")
    with pytest.raises(IndexError):  # what the model raises goes to the caller; the hooks go with the call
        llmpdb.trace(model, {"input_ids": torch.tensor([[10 ** 6]])}, show=False)
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def test_mem_counts_each_storage_once_with_its_bytes(capsys):
    import torch
    from tiny_models import tiny_llama

    model = tiny_llama()
    weights = torch.zeros(1000)                 # 4000 B
    rows_of = weights.view(10, 100)             # the same storage: counted once
    half = weights[:500]                        # a slice keeps its whole base alive: the same storage
    doubles = torch.ones(5, dtype=torch.float64)
    report = llmpdb.mem(top=5)
    printed = capsys.readouterr().out
    by_path = {row.path: row for row in report.tensors}
    assert by_path["weights"].nbytes == weights.untyped_storage().nbytes() == 4000
    assert set(by_path["weights"].shared) == {"rows_of", "half"} and "rows_of" not in by_path
    assert by_path["doubles"].nbytes == doubles.numel() * doubles.element_size()
    assert report.storages == 2 and report.total_bytes == 4040
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    assert [(h.kind, h.nbytes) for h in report.holdings] == [("model", params + buffers)]
    assert "CUDA: not in use" in printed and "model (LlamaForCausalLM)" in printed
    with pytest.raises(ValueError, match="top must be a whole number"):
        llmpdb.mem(top=0)


_CELL = re.compile(r'<rect class="cell (\w+)" x="(\d+)" y="(\d+)" width="\d+" height="\d+" fill="(#[0-9a-f]{6})">'
                   r'<title>(.*?)\[([\d-]+), ([\d-]+)\] = (.*?)</title></rect>')


def _luminance(colour: str) -> float:
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def test_show_draws_one_cell_per_value_coloured_by_it(capsys):
    import torch
    from llmpdb.render.picture import SPECIAL_COLOURS

    scores = torch.tensor([[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, float("nan"), 7.0], [8.0, 9.0, 10.0, -float("inf")]])
    picture = llmpdb.show(scores, echo=True)
    printed = capsys.readouterr().out
    assert printed.strip() == str(picture).strip() and "scores  f32 (3, 4)" in printed  # the text rendering
    html = picture._repr_html_()
    cells = _CELL.findall(html)
    assert len(cells) == scores.numel() == html.count("<rect class=\"cell")
    finite = []
    for kind, _, _, fill, name, row, col, shown in cells:
        value = scores[int(row), int(col)].item()
        assert name == "scores"
        if math.isnan(value):
            assert (kind, fill, shown) == ("nan", SPECIAL_COLOURS["nan"], "NaN")
        elif value == -math.inf:
            assert kind == "masked" and fill == SPECIAL_COLOURS["masked"]
        else:
            assert kind == "value" and float(shown) == pytest.approx(value)
            finite.append((value, fill))
    finite.sort()
    assert finite[0][1] == "#440154" and finite[-1][1] == "#fde725"  # the scale's ends: min and max
    lums = [_luminance(fill) for _, fill in finite]
    assert lums == sorted(lums) and len(set(lums)) == len(lums)      # brighter as the value grows
    assert ">0</text>" in html and ">10</text>" in html                # the legend's range
    assert "NaN (1)" in html and "masked (-inf or the dtype&#x27;s minimum) (1)" in html


def test_show_bounds_a_large_tensor_to_block_means_and_escapes_the_name():
    import torch

    torch.manual_seed(0)
    big = torch.randn(300, 500)
    html = llmpdb.show(big, name='big["<script>"]', echo=False)._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html
    cells = _CELL.findall(html)
    assert 0 < len(cells) <= 64 * 64 and len(html) < 1_000_000
    for _, _, _, _, _, rows, cols, shown in cells[:: max(1, len(cells) // 50)]:
        (r0, r1), (c0, c1) = ([int(v) for v in (span.split("-") * 2)[:2]] for span in (rows, cols))
        assert float(shown) == pytest.approx(big[r0:r1 + 1, c0:c1 + 1].mean().item(), rel=1e-3, abs=1e-4)
    hist = llmpdb.show(big[0], echo=False)._repr_html_()
    bars = re.findall(r'<rect class="bar"[^>]*><title>.*?: (\d+)</title>', hist)
    assert len(bars) == 10 and sum(map(int, bars)) == big[0].numel()
    with pytest.raises(ValueError, match="show a 2-d slice"):
        llmpdb.show(torch.zeros(2, 3, 4))


def test_ipython_displays_the_show_result_as_html():
    """A real IPython shell, in process: ``display`` of what ``llmpdb.show`` returns publishes text/html
    (the SVG), and with an HTML front end ``show`` does not also print the text."""
    pytest.importorskip("IPython", reason="IPython is not installed for this Python")
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    main = sys.modules["__main__"]  # the shell installs its own __main__: put pytest's back after
    shell = InteractiveShell.instance()
    try:
        with capture_output() as cell:
            result = shell.run_cell("import torch, llmpdb\nmask = torch.triu(torch.full((4, 4), float('-inf')), 1)\n"
                                    "picture = llmpdb.show(mask)\nfrom IPython.display import display\n"
                                    "display(picture)")
        assert result.success, result.error_in_exec
        assert "legend" not in cell.stdout  # no text rendering printed: the front end shows HTML
        bundle = cell.outputs[0].data
        assert "text/html" in bundle and bundle["text/html"].startswith("<svg")
        assert bundle["text/html"].count('class="cell masked"') == 6 and "llmpdb.show heatmap" in bundle["text/plain"]
    finally:
        InteractiveShell.clear_instance()
        sys.modules["__main__"] = main
