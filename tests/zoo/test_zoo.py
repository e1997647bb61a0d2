"""The zoo: 17 architectures built tiny in code (sizes colliding on purpose: batch == kv_heads,
seq == heads == window == conv kernel), each driven through `trace`, `statediff`, `stack-model`, `shapes`,
`kv`, `tokens`, `grads`, `nan-break` and `explain` by a real in-process llmpdb, and every answer checked
against a truth computed without llmpdb (forward hooks, the config, the state dict, torch's own grads):
a dimension is named right or `?`, never wrongly; no internal error; every line within 80 columns.

A known wrong answer is an ``xfail(strict=True)`` naming what llmpdb says against the truth: it turns into
a failure (to remove the mark) the day it is fixed. Each model is built and driven once per module.
"""

from __future__ import annotations

import re

import pytest
import torch

import llmpdb
from torch import nn

from llmpdb.forward.nan_break import nan_breaks
from tests.commands.conftest import fresh_module_state

from .truth import misnamed, shapes_rows, too_wide
from .zoo_models import ARCHS, BATCH, FFN, HEADS, HIDDEN, SEQ, VOCAB, WINDOW, Arch
from .zoo_run import zoo_run


class CausalSelfAttention(nn.Module):
    """nanoGPT's attention, defined here: a fused qkv Linear, a (k, v) tuple cache."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(dim, 3 * dim)
        self.c_proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(b, s, d)), (k, v)


class Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads)
        self.mlp = nn.Sequential(nn.Linear(dim, FFN), nn.GELU(), nn.Linear(FFN, dim))

    def forward(self, x):
        y, kv = self.attn(self.ln_1(x))
        x = x + y
        return x + self.mlp(self.ln_2(x)), kv


class NanoGPT(nn.Module):
    """A pure-PyTorch GPT (no config object): what a teaching script defines itself."""

    def __init__(self, vocab: int = VOCAB, dim: int = HIDDEN, heads: int = HEADS, layers: int = 2):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(64, dim)
        self.h = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, input_ids, use_cache=False):
        x = self.wte(input_ids) + self.wpe(torch.arange(input_ids.shape[1]))
        cache = []
        for block in self.h:
            x, kv = block(x)
            cache.append(kv)
        return {"logits": self.lm_head(self.ln_f(x)), "past_key_values": tuple(cache) if use_cache else None}


class PlainArch(Arch):
    def build(self):
        torch.manual_seed(0)
        return NanoGPT().eval()


ZOO = {**ARCHS, "nanogpt": PlainArch("nanogpt", "", "", {}, kind="plain", kv_heads=HEADS,
                                     attention_class="CausalSelfAttention")}
COMMANDS = ["trace", "statediff", "stack-model", "attn_shapes", "shapes", "kv", "tokens", "grads", "nan-break",
            "explain"]

# Known wrong answers: (arch, check) -> what llmpdb says vs the truth.
KNOWN: dict[tuple[str, str], str] = {}
# Lines over 80 columns: (arch, command) -> what is too wide ("*": every architecture).
WIDE: dict[tuple[str, str], str] = {}


def params(check: str, known: dict = KNOWN, archs=None):
    out = []
    for name in archs or ZOO:
        reason = known.get((name, check))
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        out.append(pytest.param(name, id=name, marks=marks))
    return out


_RUNS: dict[str, object] = {}


@pytest.fixture(scope="module")
def zoo():
    """``zoo(name)`` -> that architecture's ``ZooRun`` (built and driven once per module)."""

    def get(name: str):
        spec = ZOO[name]
        if name not in _RUNS:
            fresh_module_state()
            try:
                _RUNS[name] = zoo_run(spec.build(), spec)
            except pytest.skip.Exception as skipped:
                _RUNS[name] = skipped
            finally:
                nan_breaks().disarm()
                fresh_module_state()
        if isinstance(_RUNS[name], pytest.skip.Exception):
            pytest.skip(str(_RUNS[name]))
        return spec, _RUNS[name]

    yield get
    _RUNS.clear()


def sizes(spec) -> dict[str, set[int]]:
    """The size each role name stands for in this architecture (from its config)."""
    inter = {FFN, 2 * HIDDEN, 4 * HIDDEN, 16}  # ffn; Mamba's expand × hidden; GPT-2/Falcon's 4h; MoE
    return {"batch": {BATCH}, "seq": {SEQ, 3}, "q_seq": {SEQ, 3}, "k_seq": {SEQ, 3}, "heads": {HEADS},
            "kv_heads": {spec.kv_heads or HEADS}, "head_dim": {spec.head_dim or 8}, "hidden": {HIDDEN},
            "vocab": {VOCAB}, "intermediate": inter, "ffn": inter}


def row_truth(spec, path: str, shape: tuple) -> list | None:
    """The roles of a row's dims, where the test knows them independently of llmpdb."""
    kvh = "heads" if spec.kv_heads == spec.heads else "kv_heads"
    if path in ("input_ids", "ids", "inputs['input_ids']"):
        return ["batch", "seq"]
    if path.endswith("logits"):
        return ["batch", "seq", "vocab"]
    if re.search(r"\.(keys|values)$", path) and len(shape) == 4:
        if spec.name == "deepseek_v3":  # keys: the latent (kv_lora_rank), values: the rotary key, one head
            return ["batch", None, "seq", "latent" if path.endswith("keys") else "rope_key"]
        return ["batch", kvh, "seq", "head_dim"]
    if re.search(r"v_states\[\d+\]$", path):  # (conv_states, cut or not): the conv window (d_conv)
        return ["batch", "intermediate", "conv_kernel"]
    if re.search(r"t_states\[\d+\]$", path):  # (recurrent_states): the SSM state (d_state)
        return ["batch", "intermediate", "ssm_state"]
    if path.endswith("conv1d.weight']"):
        return ["intermediate", None, "conv_kernel"]
    if path == "hidden_states" and len(shape) == 3:
        return ["batch", "seq", "hidden"]
    return None


def check_shapes(spec, text: str) -> None:
    rows = shapes_rows(text)
    assert rows or " dims" not in text.splitlines()[0], text  # (no dims column: nothing named)
    known = sizes(spec)
    wrong = []
    for path, (shape_text, names) in rows.items():
        shape = tuple(int(x) for x in shape_text.strip("()").split(",") if x.strip())
        truth = row_truth(spec, path, shape)
        if truth is not None:
            wrong += [f"{path}: {w}" for w in misnamed(names, truth)]
        for name, size in zip(names, shape):  # never a name whose size is not this dim's
            if name in known and size not in known[name]:
                wrong.append(f"{path}: {name} for a dim of {size}")
    assert not wrong, "\n".join(wrong) + "\n" + text


def no_internal_error(text: str) -> None:
    assert "internal error" not in text and "Traceback" not in text and "naming failed" not in text, text


@pytest.mark.parametrize("arch", params("trace"))
def test_trace_counts_every_module_call_and_never_cuts_a_shape(zoo, arch):
    spec, run = zoo(arch)
    text = run.outputs["trace"]
    no_internal_error(text)
    assert f"{run.truth['calls']} module calls" in text, text
    cut = re.findall(r"\([0-9, ]*…[0-9, ]*\)", text)
    assert not cut, f"shapes cut: {cut}\n{text}"


@pytest.mark.parametrize("arch", params("statediff"))
def test_statediff_finds_the_module_prefix(zoo, arch):
    spec, run = zoo(arch)
    text = run.outputs["statediff"]
    no_internal_error(text)
    n = run.truth["state_keys"]
    assert f"strip `module.` → {n}/{n} match" in text, text


@pytest.mark.parametrize("arch", params("stack-model", archs=[n for n in ZOO if ZOO[n].attention_class]))
def test_stack_model_in_attention_names_the_module(zoo, arch):
    spec, run = zoo(arch)
    text = run.outputs["stack-model"]
    no_internal_error(text)
    path = run.truth["attention_path"]
    assert re.search(rf"^>#\d+\s+{re.escape(path)}\s", text, re.M), text
    assert re.search(r"^ +#\d+\s+\(root\)\s", text, re.M), text
    head = " ".join(line.strip() for line in text.split(" #  module")[0].splitlines())  # the path line, unwrapped
    assert f"| {path} (" in head, text
    if spec.kind == "ssm":
        assert "attn" not in head


@pytest.mark.parametrize("arch", params("attn_shapes", archs=[n for n in ZOO if ZOO[n].attention_class]))
def test_shapes_in_attention_names_dims_right_or_unknown(zoo, arch):
    spec, run = zoo(arch)
    no_internal_error(run.outputs["attn_shapes"])
    check_shapes(spec, run.outputs["attn_shapes"])


@pytest.mark.parametrize("arch", params("shapes"))
def test_shapes_after_the_forward_names_dims_right_or_unknown(zoo, arch):
    spec, run = zoo(arch)
    no_internal_error(run.outputs["shapes"])
    check_shapes(spec, run.outputs["shapes"])


@pytest.mark.parametrize("arch", params("kv"))
def test_kv_reports_the_cache_the_config_describes(zoo, arch):
    spec, run = zoo(arch)
    text = run.outputs["kv"]
    no_internal_error(text)
    layers = 1 if spec.kind == "seq2seq" else 2
    if spec.kind == "encoder":
        assert "no KV cache" in text and len(text.splitlines()) <= 4, text  # (its wrapped error)
        return
    assert re.search(rf"\b{layers} layers?\b", text), text
    if spec.kind == "ssm":
        assert "no keys/values" in text, text
        assert not re.search(r"\([0-9, ]*…", text), text  # the states' shapes whole
        return
    if spec.name == "deepseek_v3":  # MLA: the latent and the rotary key, sizes from the config
        cfg = spec.config
        assert "MLA latent" in text and f"q heads {spec.heads}" in text, text
        assert f"kv_lora_rank {cfg['kv_lora_rank']} + qk_rope_head_dim {cfg['qk_rope_head_dim']}" in text, text
        assert "MQA" not in text and "sharded or repeated" not in text, text
        shape = (BATCH, 1, SEQ)
        assert re.search(rf"^0 +full +\({', '.join(map(str, shape + (cfg['kv_lora_rank'],)))}\) +"
                         rf"\({', '.join(map(str, shape + (cfg['qk_rope_head_dim'],)))}\)", text, re.M), text
        return
    kinds = {spec.heads: "MHA", 1: "MQA"}
    assert f"kv heads {spec.kv_heads}" in text, text
    if spec.kind not in ("seq2seq", "plain"):
        assert f"q heads {spec.heads}" in text and kinds.get(spec.kv_heads, "GQA") in text, text
    assert f"batch {BATCH}" in text and f"head_dim {spec.head_dim}" in text, text
    assert "sharded or repeated" not in text, text
    for index, (kind, shape) in enumerate(run.truth["cache_layers"]):  # each layer: kind, keys, window
        if shape is None:
            continue
        row = re.search(rf"^(?:self +)?{index} +(\S+) +(\([0-9, ]+\))", text, re.M)
        assert row and row.group(1) == kind and row.group(2) == str(shape), (index, kind, shape, text)
        if kind == "sliding":
            assert re.search(rf"^{index} +sliding .* {WINDOW}$", text, re.M), text
    assert not re.search(r"\([0-9, ]*…", text), text


@pytest.mark.parametrize("arch", params("tokens"))
def test_tokens_decodes_every_id(zoo, arch):
    spec, run = zoo(arch)
    text = run.outputs["tokens"]
    no_internal_error(text)
    ids = spec.inputs()["input_ids"]
    for row, seq in enumerate(ids.tolist()):
        assert f"row {row}: {len(seq)} tokens, {len(seq)} attended" in text, text
        for pos, token_id in enumerate(seq):
            assert re.search(rf"^{pos}\s+{token_id}\s+t{token_id}\s+'t{token_id}'", text, re.M), text


@pytest.mark.parametrize("arch", params("grads"))
def test_grads_counts_what_torch_counts(zoo, arch):
    spec, run = zoo(arch)
    text = run.outputs["grads"]
    no_internal_error(text)
    trainable, with_grad = run.truth["grads"]
    assert f"grads: {trainable} trainable ({with_grad} with a grad" in text, text


@pytest.mark.parametrize("arch", params("nan-break"))
def test_nan_break_stops_at_the_first_module_forward_hooks_see(zoo, arch):
    spec, run = zoo(arch)
    text = run.outputs["nan-break"]
    no_internal_error(text)
    assert f"nan-break: {run.truth['nan_module']} (Linear) output has" in text, text


# Where the NaN never reaches the output of the block that holds its module, `nan-break --blocks` cannot see it.
SWALLOWED = {"nanogpt": "torch's CPU scaled_dot_product_attention gives finite values for a query holding a NaN"}


@pytest.mark.parametrize("arch", params("nan-break"))
def test_nan_break_blocks_stops_at_the_block_then_inside_at_the_module_forward_hooks_see(zoo, arch):
    """The first forward stops at the block holding the truth's module (or at that module, when it is a
    block itself); the second stops at the truth's module, found by the checks armed inside the block."""
    spec, run = zoo(arch)
    chunks = run.outputs["nan-break --blocks"]
    no_internal_error("\n".join(chunks))
    assert chunks[0].startswith("nan-break: checking the outputs of "), chunks
    truth = run.truth["nan_module"]
    block = re.match(r"nan-break: (\S+) \((\w+)\) output has", chunks[1])
    if arch in SWALLOWED:
        assert block is None and "output has" not in "\n".join(chunks), chunks
        return
    assert block, chunks
    if block.group(1) == truth:  # the module is a block itself: nothing inside to check
        assert "nan-break is now off" in chunks[1], chunks
        return
    assert truth.startswith(block.group(1) + "."), (truth, chunks[1])
    assert re.search(r"now checking the \d+ modules inside it only", chunks[1]), chunks[1]
    assert chunks[2].startswith(f"nan-break: {truth} (Linear) output has"), chunks[2]
    assert "nan-break is now off" in chunks[2], chunks[2]


@pytest.mark.parametrize("arch", params("explain"))
def test_explain_names_the_linear_mismatch(zoo, arch):
    spec, run = zoo(arch)
    text = run.outputs["explain"]
    no_internal_error(text)
    _, in_features = run.truth["linear"]
    assert f"expects in_features {in_features}; the input's last dim is {in_features + 1}" in text, text
    line = next(l for l in text.splitlines() if l.strip().startswith("hidden "))
    names = [n.strip() for n in line.split(")", 1)[1].split("·")]
    assert not misnamed(names, ["batch", "seq", None]), text


def width_params():
    out = []
    for name in ZOO:
        for command in COMMANDS:
            if command in ("stack-model", "attn_shapes") and not ZOO[name].attention_class:
                continue
            reason = WIDE.get((name, command)) or WIDE.get(("*", command))
            if (name, command) in WIDE_FITS:
                reason = None
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            out.append(pytest.param(name, command, id=f"{name}-{command}", marks=marks))
    return out


WIDE_FITS = {("nanogpt", "stack-model")}  # (a short path line: no cache, no module class names)


@pytest.mark.parametrize("arch, command", width_params())
def test_every_line_fits_80_columns(zoo, arch, command):
    spec, run = zoo(arch)
    wide = too_wide(run.outputs[command])
    assert not wide, "\n".join(wide)


# The Python API (llmpdb.shapes / kv / statediff), in the test's own frame, as a debug console calls it.
API_KNOWN: dict[tuple[str, str], str] = {}


def api_frame(model, spec):
    """A frame holding the model and a copy of its ids only (no ``input_ids`` to take batch/seq from)."""
    ids = spec.inputs()["input_ids"].clone()
    walk = llmpdb.shapes()
    return walk, ids


@pytest.mark.parametrize("arch", params("api", API_KNOWN))
def test_api_shapes_names_ids_right_or_unknown(zoo, arch, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    spec, run = zoo(arch)
    walk, ids = api_frame(run.model, spec)
    text = capsys.readouterr().out
    assert [info.path for info in walk] == ["ids"], text
    check_shapes(spec, text)
    assert not too_wide(text), text


@pytest.mark.parametrize("arch", params("api-kv"))
def test_api_kv_and_statediff(zoo, arch, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    spec, run = zoo(arch)
    model = run.model
    with torch.no_grad():
        out = model(**spec.inputs())
    if spec.kind == "encoder":
        with pytest.raises(ValueError, match="not a KV cache|no KV cache"):
            llmpdb.kv(out, show=False)
    else:
        report = llmpdb.kv(out)
        assert report is not None
    prefixed = {"module." + k: v for k, v in model.state_dict().items()}
    llmpdb.statediff(model, prefixed)
    text = capsys.readouterr().out
    n = run.truth["state_keys"]
    assert f"strip `module.` → {n}/{n} match" in text, text
    no_internal_error(text)


TWO = "logits of two models whose configs agree (vocab 96) named batch·seq·? vs batch·seq·vocab"


def test_two_models_with_agreeing_configs_keep_the_names(zoo, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    llama, mistral = zoo("llama")[1].model, zoo("mistral")[1].model
    with torch.no_grad():
        logits = llama(**ARCHS["llama"].inputs()).logits
    llmpdb.shapes(logits)
    text = capsys.readouterr().out
    assert shapes_rows(text)["logits"][1] == ["batch", "seq", "vocab"], text
    del mistral
