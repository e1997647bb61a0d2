"""`mem` under a real llmpdb debugger on a tiny Llama: the largest tensors in order with their bytes
(computed here from numel × element_size), views counted once, meta tensors 0 bytes, the model, its
gradients, the KV cache and an AdamW optimizer's state; CUDA not in use; one clear error per bad input."""

from __future__ import annotations

import torch
from tiny_models import tiny_llama
from transcript import debug_transcript, outputs_of

from llmpdb.render.style import visible_len
from llmpdb.units import human_bytes

SEEN: dict = {}


def training_stop():
    model = tiny_llama()
    ids = torch.tensor([[1, 5, 9, 3, 2, 7, 8]])
    outputs = model(ids, labels=ids, use_cache=True)
    outputs.loss.backward()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    opt.step()
    hidden = torch.randn(3, 50, 64)
    window = hidden[:, :10]            # a view of hidden: counted once, with hidden
    planned = torch.empty(1000, 1000, device="meta")
    SEEN.update(locals())
    breakpoint()
    return model


def _rows(block: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split()[1:] for line in block.splitlines() if line.split()}


def test_mem_lists_the_largest_tensors_in_order_with_their_bytes():
    chunks = outputs_of(debug_transcript(training_stop, ["c", "mem --top 4", "c"], width=120))
    blocks = chunks[0].split("\n\n")
    assert blocks[0] == "CUDA: not in use (torch.cuda is not initialised)"
    lines = blocks[1].splitlines()
    # computed here: every tensor reachable from the locals the walk enters (modules and optimizers are not)
    out = SEEN["outputs"]
    candidates = {"hidden": SEEN["hidden"], "ids": SEEN["ids"], "outputs.loss": out.loss,
                  "outputs.logits": out.logits}
    for i, layer in enumerate(out.cache.layers):
        candidates[f"outputs.cache.layers[{i}].keys"] = layer.keys
        candidates[f"outputs.cache.layers[{i}].values"] = layer.values
    sizes = sorted(((t.numel() * t.element_size(), name) for name, t in candidates.items()), key=lambda x: -x[0])
    assert lines[0].startswith(f"largest tensors in this frame: 4 of {len(candidates) + 1} storages")
    table = lines[1:]
    assert table[0].split() == ["path", "shape", "dtype", "device", "bytes", "also"]
    for (nbytes, name), row in zip(sizes[:4], table[1:]):
        assert row.split()[0] == name
        assert human_bytes(nbytes) in row
    assert _rows(blocks[1])["hidden"][-1] == "window"  # the view shares hidden's storage
    assert len(table) == 5


def test_mem_model_gradients_cache_and_optimizer_rows():
    chunks = outputs_of(debug_transcript(training_stop, ["c", "mem --top 20", "c"], width=160))
    blocks = chunks[0].split("\n\n")
    rows = _rows(blocks[1])
    assert rows["planned"][-2:] == ["meta", "meta"]  # device meta, 0 bytes shown as meta
    model, opt, out = SEEN["model"], SEEN["opt"], SEEN["outputs"]
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    grads = sum(p.grad.numel() * p.grad.element_size() for p in model.parameters() if p.grad is not None)
    state = sum(t.numel() * t.element_size() for s in opt.state.values() for t in s.values() if torch.is_tensor(t))
    cache = sum(t.numel() * t.element_size() for layer in out.cache.layers for t in (layer.keys, layer.values))
    held = {line.split()[0]: " ".join(line.split()) for line in blocks[2].splitlines()}
    assert held["held"].split()[:3] == ["held", "by", "name"]
    assert f"model (LlamaForCausalLM) {human_bytes(params + buffers)}" in held["model"]
    assert f"params {human_bytes(params)}" in held["model"]
    assert human_bytes(grads) in held["gradients"]
    n = len(list(model.parameters()))
    assert f"{n} of {n} parameters have .grad" in held["gradients"]
    assert f"outputs.cache (DynamicCache) {human_bytes(cache)}" in held["kv"]
    assert f"opt (AdamW) {human_bytes(state)}" in held["optimizer"]
    assert f"{n} of {n} params with .grad" in held["optimizer"]


def test_mem_fits_a_narrow_width():
    chunks = outputs_of(debug_transcript(training_stop, ["c", "mem", "c"], width=60))
    for line in chunks[0].splitlines():
        if not line.startswith("(columns hidden"):
            assert visible_len(line) <= 60, line
    assert "(columns hidden to fit 60:" in chunks[0]


def test_mem_reads_no_tensor_data_and_leaves_grad_mode():
    before = torch.is_grad_enabled()
    chunks = outputs_of(debug_transcript(training_stop, ["c", "mem", "p torch.is_grad_enabled()", "c"]))
    assert chunks[1].strip() == str(before)


def test_mem_errors():
    def stop():
        x = torch.ones(3)
        breakpoint()
        return x

    chunks = outputs_of(debug_transcript(stop, ["c", "mem --top 0", "mem --top many", "mem x", "mem --all",
                                                "p x.sum().item()", "c"]))
    assert chunks[0] == "*** mem: bad value for --top: '0': needs a whole number from 1 to 1000000 (usage: mem [--top N])"
    assert chunks[1] == "*** mem: bad value for --top: 'many': needs a whole number from 1 to 1000000 (usage: mem [--top N])"
    assert chunks[2].startswith("*** mem: mem takes no expression, only --top N (got 'x')")
    assert chunks[3] == "*** mem: unknown option --all (usage: mem [--top N])"
    assert chunks[4].strip() == "3.0"  # the debuggee goes on
