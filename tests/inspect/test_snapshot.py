"""llmpdb.inspect.snapshot + render_snapdiff: real training steps, frozen layers, NaN, exact copies."""

from __future__ import annotations

import math

import pytest
import torch
from tiny_models import plain_model, tiny_llama

import llmpdb.inspect.snapshot as snapshot_module
import llmpdb.inspect.fingerprint as fingerprint_module
from llmpdb.inspect.snapshot import (
    SnapshotError,
    compare_snapshots,
    diff_with_model,
    fingerprints,
    take_snapshot,
)
from llmpdb.render.statediff import render_snapdiff, render_snapshot, render_snapshot_list


def llama_with_frozen_layer0():
    model = tiny_llama().train()
    model.model.layers[0].requires_grad_(False)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    return model, optimizer


def train_step(model, optimizer):
    torch.manual_seed(1)
    ids = torch.randint(0, 256, (2, 8))
    model(ids, labels=ids).loss.backward()
    optimizer.step()


def test_training_step_frozen_layer_unchanged_others_changed():
    model, optimizer = llama_with_frozen_layer0()
    before = take_snapshot(model, name="before", stop=1)
    assert render_snapshot(before) == (
        "snapshot before of LlamaForCausalLM at stop 1: 23 tensors, 0 grads, fingerprints")
    train_step(model, optimizer)
    diff = diff_with_model(before, model, stop=2)
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
    trained = {n for n, p in model.named_parameters() if p.requires_grad}
    assert len(frozen) == 9 and len(trained) == 12
    assert {c.name for c in diff.changed} == trained
    assert {u.name for u in diff.unchanged if u.reason == "frozen (requires_grad=False)"} == frozen
    assert diff.nonfinite == [] and diff.grads == {"appeared": 12}
    assert render_snapdiff(diff, width=100) == (
        "statediff before (stop 1) → now (stop 2): LlamaForCausalLM, 23 tensors: 12 changed, 11 unchanged, "
        "0 became NaN/Inf\n"
        "changed: 12 (relative L2 change, estimated from strided samples; --exact for exact values)\n"
        "  model.embed_tokens.weight  1.2e-02\n"
        "  model.layers.1.* (9)       1.0e-03…5.3e-02\n"
        "  model.norm.weight          1.0e-03\n"
        "  lm_head.weight             5.4e-02\n"
        "unchanged: 11\n"
        "  model.layers.0.* (9)    frozen (requires_grad=False)\n"
        "  model.rotary_emb.* (2)  buffer\n"
        "grads: 12 appeared"
    )


def test_exact_snapshot_gives_the_true_relative_l2_and_samples_estimate_it():
    model, optimizer = llama_with_frozen_layer0()
    start = {n: p.detach().clone() for n, p in model.named_parameters()}
    exact = take_snapshot(model, name="e", exact=True)
    sampled = take_snapshot(model, name="s")
    assert exact.copied_bytes > 0 and sampled.copied_bytes == 0
    train_step(model, optimizer)
    by_exact = {c.name: c for c in diff_with_model(exact, model).changed}
    by_sample = {c.name: c for c in diff_with_model(sampled, model).changed}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            assert name not in by_exact
            continue
        truth = (torch.linalg.vector_norm((p.detach() - start[name]).double())
                 / torch.linalg.vector_norm(start[name].double())).item()
        assert by_exact[name].how == "exact" and math.isclose(by_exact[name].rel_l2, truth, rel_tol=1e-9)
        assert by_sample[name].rel_l2 == pytest.approx(truth, rel=0.3)
    text = render_snapdiff(diff_with_model(exact, model), width=100)
    assert text.splitlines()[1] == "changed: 12 (relative L2 change)"


class Probe(torch.nn.Module):
    """A plain model with one parameter per reason a weight can stay the same."""

    def __init__(self):
        super().__init__()
        self.lm = plain_model()
        self.unused = torch.nn.Parameter(torch.ones(3))  # never in the graph: grad stays None

    def forward(self, ids):
        return self.lm(ids)[0]


def test_unchanged_reasons():
    model = Probe()
    model.lm.embed.requires_grad_(False)
    optimizer = torch.optim.SGD([p for n, p in model.named_parameters() if not n.startswith("lm.head")], lr=0.1)
    before = take_snapshot(model, name="b")
    model(torch.arange(8).view(1, 8)).square().mean().backward()
    model.lm.blocks[1].out.bias.grad.zero_()
    optimizer.step()
    reasons = {u.name: u.reason for u in diff_with_model(before, model).unchanged}
    assert reasons == {
        "unused": "grad None",
        "lm.embed.weight": "frozen (requires_grad=False)",
        "lm.blocks.1.out.bias": "grad all zero",
        "lm.head.weight": "zero step (grad present: not in the optimizer? lr 0?)",
        "lm.head.bias": "zero step (grad present: not in the optimizer? lr 0?)",
    }


def test_nan_injection_is_reported():
    model, optimizer = llama_with_frozen_layer0()
    before = take_snapshot(model, name="b", stop=1)
    train_step(model, optimizer)
    with torch.no_grad():
        model.lm_head.weight[3, 5] = float("nan")
        model.model.norm.weight[0] = float("inf")
    model.lm_head.weight.grad[0, 0] = float("nan")
    diff = diff_with_model(before, model, stop=2)
    assert [(n.name, n.nan, n.inf, n.became) for n in diff.nonfinite] == [
        ("model.norm.weight", 0, 1, True), ("lm_head.weight", 1, 0, True), ("lm_head.weight.grad", 1, 0, True)]
    assert "lm_head.weight" in {c.name for c in diff.changed}
    lines = render_snapdiff(diff, width=100).splitlines()
    assert lines[0].endswith("12 changed, 11 unchanged, 3 became NaN/Inf")
    start = lines.index("NaN/Inf: 3 (3 became non-finite)")
    assert lines[start + 1:start + 4] == [
        "  model.norm.weight    nan 0  inf 1  became",
        "  lm_head.weight       nan 1  inf 0  became",
        "  lm_head.weight.grad  nan 1  inf 0  became",
    ]


def test_zero_initialised_weight_reports_absolute_change():
    model = plain_model()
    model.lora_b = torch.nn.Parameter(torch.zeros(4, 4))
    before = take_snapshot(model, name="b")
    with torch.no_grad():
        model.lora_b += 0.5
    change = next(c for c in diff_with_model(before, model).changed if c.name == "lora_b")
    assert change.rel_l2 is None and change.abs_l2 == pytest.approx(2.0)
    assert "  lora_b" in render_snapdiff(diff_with_model(before, model), width=100)
    assert "from 0, L2 2.0e+00" in render_snapdiff(diff_with_model(before, model), width=100)


def test_compare_two_snapshots_with_new_and_gone_tensors():
    model = plain_model()
    first = take_snapshot(model, name="first", stop=1)
    model.adapter = torch.nn.Linear(2, 2)
    del model.head
    second = take_snapshot(model, name="second", stop=2)
    diff = compare_snapshots(first, second)
    assert diff.added == ["adapter.weight", "adapter.bias"] and diff.removed == ["head.weight", "head.bias"]
    assert diff.changed == [] and len(diff.unchanged) == len(second.tensors) - 2
    text = render_snapdiff(diff, width=100)
    assert "new tensors: 2\n  adapter.weight\n  adapter.bias\ngone tensors: 2\n  head.weight\n  head.bias" in text
    assert render_snapshot_list([first, second]) == (
        "  first of PlainLM at stop 1: 11 tensors, 0 grads, fingerprints\n"
        "* second of PlainLM at stop 2: 11 tensors, 0 grads, fingerprints")


def test_fingerprints_in_chunks_match_whole_tensor_sums(monkeypatch):
    torch.manual_seed(0)
    base = torch.randn(40, 30)
    t = base.t()[:, 5:]  # non-contiguous view
    whole = fingerprints([t])[0]
    monkeypatch.setattr(fingerprint_module, "CHUNK", 7)
    chunked = fingerprints([t])[0]
    assert whole[0] == pytest.approx(t.double().sum().item()) and chunked[0] == pytest.approx(whole[0])
    assert chunked[1] == pytest.approx(t.double().square().sum().item())
    assert len(whole[4]) == 256 and whole[4][0] == t[0, 0].item() and whole[4] == chunked[4]
    scalar, meta, empty = fingerprints([torch.tensor(2.5), torch.empty(3, device="meta"), torch.empty(0)])
    assert scalar == (2.5, 6.25, 0, 0, (2.5,))
    assert meta == "meta tensor (no values)" and empty == "empty"


def test_exact_refused_when_memory_is_short(monkeypatch):
    monkeypatch.setattr(snapshot_module, "free_bytes", lambda device: 1024)
    with pytest.raises(SnapshotError) as err:
        take_snapshot(plain_model(), exact=True)
    assert str(err.value) == (
        "--exact needs 0 MiB on cpu but 0 MiB are free; take a fingerprint snapshot (without --exact)")


def test_snapshot_of_meta_model_and_of_non_models():
    with torch.device("meta"):
        model = plain_model()
    snap = take_snapshot(model, name="m")
    assert all(t.skipped == "meta tensor (no values)" for t in snap.tensors.values())
    assert render_snapshot(snap).endswith("; 11 without values (meta tensor (no values))")
    with pytest.raises(SnapshotError, match="^a int is not a module or a dict of tensors$"):
        take_snapshot(3)


def test_trim_snapshots_drops_the_oldest_by_count_and_by_bytes():
    from llmpdb.inspect.snapshot import trim_snapshots

    model = plain_model()
    store = {name: take_snapshot(model, name=name) for name in ("a", "b", "c", "d")}
    assert [s.name for s in trim_snapshots(store, limit=3, max_bytes=2**40)] == ["a"]
    assert list(store) == ["b", "c", "d"]
    one = store["d"].nbytes
    assert [s.name for s in trim_snapshots(store, limit=3, max_bytes=2 * one)] == ["b"]
    assert [s.name for s in trim_snapshots(store, limit=3, max_bytes=1)] == ["c"]  # the newest always stays
    assert list(store) == ["d"]


def test_a_dict_of_tensors_is_read_by_type_and_a_hostile_value_is_skipped():
    reads = []

    class Spy:
        @property
        def __class__(self):
            reads.append("__class__")
            return torch.Tensor

        def __getattr__(self, name):
            reads.append(name)
            raise AttributeError(name)

    snap = take_snapshot({"w": torch.ones(3), "spy": Spy()}, name="d")
    assert list(snap.tensors) == ["w"] and reads == []
    with pytest.raises(SnapshotError, match="^a Spy is not a module or a dict of tensors$"):
        take_snapshot(Spy())
    assert reads == []
