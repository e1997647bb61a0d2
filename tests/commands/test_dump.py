"""``dump`` and ``snapshot`` under a real llmpdb debugger: files that load back, mode 0600, the size limit,
bad targets refused."""

from __future__ import annotations

import os
import stat

import pytest
import torch

from llmpdb.files.safetensors_file import read_safetensors
from transcript import debug_transcript, outputs_of
from tiny_models import tiny_llama


def infer(target):
    model = tiny_llama()
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    with torch.no_grad():
        outputs = model(input_ids=ids, use_cache=True)
    breakpoint()
    return outputs


def _expected(outputs) -> dict[str, torch.Tensor]:
    cache = outputs.cache if hasattr(outputs, "cache") else outputs.past_key_values
    found = {"outputs.logits": outputs.logits}
    name = "cache" if hasattr(outputs, "cache") else "past_key_values"
    for i, layer in enumerate(cache.layers):
        found[f"outputs.{name}.layers[{i}].keys"] = layer.keys
        found[f"outputs.{name}.layers[{i}].values"] = layer.values
    return found


def test_dump_of_tiny_llama_outputs_loads_back_equal(tmp_path):
    target = tmp_path / "out.safetensors"
    kept = {}

    def run():
        kept["outputs"] = infer(target)

    out = outputs_of(debug_transcript(run, ["c", f"dump outputs {target}", "c"]))
    assert f"to {target}" in out[0] and "safetensors.torch.load_file(" in out[0], out[0]
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
    expected = _expected(kept["outputs"])
    ours, metadata = read_safetensors(str(target))
    assert list(ours) == list(expected)
    assert all(torch.equal(ours[k], expected[k]) for k in expected)
    from safetensors.torch import load_file

    theirs = load_file(str(target))
    assert set(theirs) == set(expected) and all(torch.equal(theirs[k], expected[k]) for k in expected)
    assert '"kind": "dump"' in metadata["llmpdb"]


def test_views_non_contiguous_bf16_kept_meta_refused_by_name(tmp_path):
    target = tmp_path / "mixed.safetensors"
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)

    def run():
        data = {"t": base.t(), "row": base[1], "half": base.to(torch.bfloat16), "ghost": torch.empty(3, device="meta"),
                "again": base}
        breakpoint()
        return data

    out = outputs_of(debug_transcript(run, ["c", f"dump data {target}", "c"]))
    assert "left out: data['ghost'] (a meta tensor (no data))" in out[0], out[0]
    loaded, _ = read_safetensors(str(target))
    assert torch.equal(loaded["data['t']"], base.t()) and torch.equal(loaded["data['row']"], base[1])
    assert loaded["data['half']"].dtype == torch.bfloat16 and torch.equal(loaded["data['half']"], base.to(torch.bfloat16))
    assert "data['ghost']" not in loaded


def _size_session(target, commands):
    def run():
        big = torch.zeros(1024, 1024)  # 4 MiB
        breakpoint()
        return big

    return outputs_of(debug_transcript(run, ["c", *commands]))


def test_over_the_limit_asks_and_no_writes_nothing(tmp_path):
    target = tmp_path / "big.safetensors"
    out = _size_session(target, [f"dump big {target} --max-mib 1", "n", "c"])
    assert "more than the 1 MiB limit; write" in out[0] and "nothing written" in out[0], out[0]
    assert not target.exists()
    out = _size_session(target, [f"dump big {target} --max-mib 1", "y", "c"])
    assert target.exists() and os.path.getsize(target) > 4 * 2**20


def test_over_the_limit_with_nobody_to_ask_refuses_with_one_line(tmp_path):
    target = tmp_path / "big.safetensors"
    out = _size_session(target, [f"dump big {target} --max-mib 1"])  # input ends: nobody answers
    refusal = [line for line in out[0].splitlines() if "refused" in line]
    assert len(refusal) == 1 and "over the 1 MiB limit and nobody can confirm" in refusal[0], out[0]
    assert not target.exists()
    out = _size_session(target, [f"dump big {target} --max-mib 1 --yes", "c"])
    assert target.exists()


@pytest.mark.parametrize("kind", ["fifo", "symlink", "folder"])
def test_bad_targets_are_refused(tmp_path, kind):
    target = tmp_path / "x.safetensors"
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "symlink":
        os.symlink(victim, target)
    else:
        target.mkdir()

    def run():
        t = torch.ones(3)
        breakpoint()
        return t

    out = outputs_of(debug_transcript(run, ["c", f"dump t {target}", "c"]))
    word = {"fifo": "FIFO", "symlink": "symbolic link", "folder": "folder"}[kind]
    assert out[0].startswith("*** dump: ") and "refused" in out[0] and word in out[0], out[0]
    assert len(out[0].splitlines()) == 1
    assert victim.read_text() == "keep me"
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]


def test_snapshot_at_a_stop_holds_tensors_and_records(tmp_path):
    target = tmp_path / "stop.safetensors"

    def run():
        infer(target)

    out = outputs_of(debug_transcript(run, ["c", f"snapshot {target}", "c"]))
    assert "snapshot: wrote" in out[0], out[0]
    tensors, metadata = read_safetensors(str(target))
    import json

    doc = json.loads(metadata["llmpdb"])
    assert doc["kind"] == "snapshot" and doc["location"]["function"] == "infer"
    assert doc["kv"]["report"]["record"] == "CacheReport"
    assert tensors["ids"].tolist() == [[1, 2, 3, 4, 5]]
