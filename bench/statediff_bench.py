"""Time ``statediff`` of a meta-device model against a ≥2 GB sharded checkpoint, next to full loads.

Usage::

    python bench/statediff_bench.py            # writes ~2.2 GB twice to a temp dir, measures, deletes it
    python bench/statediff_bench.py --dir /big/disk
    python bench/statediff_bench.py --bomb-only --bomb-mib 4096   # the zip-bomb rows alone

The model is a TinyLlama-1.1B-shaped ``LlamaForCausalLM`` built on the meta device (no weights). The same
zero bf16 weights are written as sharded safetensors (with ``model.safetensors.index.json``) and as sharded
``torch.save`` pickles (with ``pytorch_model.bin.index.json``), one shard in memory at a time. Each
measurement runs in a fresh subprocess after its imports and the model build: wall time of the call, and
peak RSS (``resource.getrusage``, its high-water mark reset through ``/proc/self/clear_refs`` just before
the call) minus the RSS just before the call: what the call added. The checkpoints are written by another
subprocess, so that no measured process inherits the writer's peak. ``load_file`` maps the files lazily;
``load_file + read`` also reads every tensor once (what loading into a model costs).
Targets for statediff: under 0.5 s and 150 MB, whatever the size of the weights.

The zip-bomb rows: a ``.pt`` whose ``archive/data.pkl`` deflates from zeros (``--bomb-mib``, 1 GiB by
default; a few MB on disk). ``read_checkpoint`` refuses it from the zip's central directory; the
alternative, ``torch.load(weights_only=True)``, inflates all of it before it fails. Target for the
refusal: under 64 MB added, whatever the bomb's size.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = dict(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
              num_attention_heads=32, num_key_value_heads=4, tie_word_embeddings=False)
SHARD_BYTES = 500 * 2**20
TIME_TARGET, RSS_TARGET = 0.5, 150.0
BOMB_RSS_TARGET = 64.0

CHILD = r"""
import json, os, resource, sys, time
sys.path.insert(0, {root!r})
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from llmpdb.inspect.statediff import statediff
import safetensors.torch

from llmpdb.inspect.checkpoint import CheckpointError, read_checkpoint

kind, folder = sys.argv[1], sys.argv[2]
if not kind.endswith("bomb"):
    with torch.device("meta"):
        model = LlamaForCausalLM(LlamaConfig(**json.loads(sys.argv[3]))).to(torch.bfloat16)
    files = sorted(os.path.join(folder, f) for f in os.listdir(folder) if not f.endswith(".json"))

def rss_mb():
    with open("/proc/self/status") as fh:
        return next(int(l.split()[1]) for l in fh if l.startswith("VmRSS:")) / 1024

try:  # reset the peak (Linux >= 4.0) so getrusage measures this call, not the imports before it
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
except OSError:
    pass
before = rss_mb()
start = time.perf_counter()
if kind == "read_checkpoint_bomb":
    try:
        read_checkpoint(folder)
        raise SystemExit("the zip bomb was read")
    except CheckpointError as exc:
        assert "zip bomb" in str(exc), exc
    count = 0
elif kind == "torch_load_bomb":
    try:
        torch.load(folder, weights_only=True)
    except Exception:  # it fails, after inflating data.pkl
        pass
    count = 0
elif kind == "statediff":
    diff = statediff(model, folder)
    assert diff.ok and diff.matched == diff.model_count, diff
    count = diff.matched
elif kind == "load_file":
    count = sum(len(safetensors.torch.load_file(f)) for f in files)
elif kind == "load_file_read":
    count = 0
    for f in files:
        tensors = safetensors.torch.load_file(f)
        count += sum(1 for t in tensors.values() if t.sum().item() == 0)
        del tensors
else:
    count = sum(len(torch.load(f, weights_only=True)) for f in files)
elapsed = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(dict(seconds=elapsed, added_mb=max(0.0, peak - before), peak_mb=peak, tensors=count)))
"""


def write_checkpoints(folder: str) -> tuple[str, str, int]:
    """Write the sharded safetensors and .bin checkpoints; returns their folders and the bytes per copy."""
    import torch
    from safetensors.torch import save_file
    from transformers import LlamaConfig, LlamaForCausalLM

    with torch.device("meta"):
        model = LlamaForCausalLM(LlamaConfig(**CONFIG))
    metas = [(n, tuple(p.shape)) for n, p in model.state_dict().items()]
    shards: list[list[tuple[str, tuple[int, ...]]]] = [[]]
    size = 0
    for name, shape in metas:
        nbytes = 2 * int(torch.Size(shape).numel())
        if shards[-1] and size + nbytes > SHARD_BYTES:
            shards.append([])
            size = 0
        shards[-1].append((name, shape))
        size += nbytes
    st_dir, bin_dir = os.path.join(folder, "safetensors"), os.path.join(folder, "bin")
    os.makedirs(st_dir)
    os.makedirs(bin_dir)
    total = 0
    st_map, bin_map = {}, {}
    for i, shard in enumerate(shards):
        tensors = {name: torch.zeros(shape, dtype=torch.bfloat16) for name, shape in shard}
        st_name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        bin_name = f"pytorch_model-{i + 1:05d}-of-{len(shards):05d}.bin"
        save_file(tensors, os.path.join(st_dir, st_name), metadata={"format": "pt"})
        torch.save(tensors, os.path.join(bin_dir, bin_name))
        total += sum(t.numel() * 2 for t in tensors.values())
        st_map.update({n: st_name for n in tensors})
        bin_map.update({n: bin_name for n in tensors})
        del tensors
    for path, wmap in ((os.path.join(st_dir, "model.safetensors.index.json"), st_map),
                       (os.path.join(bin_dir, "pytorch_model.bin.index.json"), bin_map)):
        with open(path, "w") as fh:
            json.dump({"metadata": {"total_size": total}, "weight_map": wmap}, fh)
    return st_dir, bin_dir, total


def write_bomb(path: str, mib: int) -> int:
    """A zip whose ``archive/data.pkl`` is ``mib`` MiB of deflated zeros; returns its size on disk."""
    import zipfile

    chunk = bytes(2**20)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        with zf.open("archive/data.pkl", "w", force_zip64=True) as member:
            for _ in range(mib):
                member.write(chunk)
        zf.writestr("archive/version", "3\n")
    return os.path.getsize(path)


def bomb_rows(folder: str, mib: int) -> bool:
    """Measure refusing the zip bomb against torch.load; print the rows; True when the target is met."""
    bomb = os.path.join(folder, "bomb.pt")
    size = write_bomb(bomb, mib)
    print(f"zip bomb: {mib} MiB of data.pkl in {size / 2**20:.1f} MiB on disk")
    runs = [("read_checkpoint (refuses the bomb)", measure("read_checkpoint_bomb", bomb)),
            ("torch.load(weights_only=True) bomb", measure("torch_load_bomb", bomb))]
    print(f"{'':38}{'seconds':>10}{'added MB':>11}{'peak MB':>10}")
    for label, r in runs:
        print(f"{label:38}{r['seconds']:10.3f}{r['added_mb']:11.1f}{r['peak_mb']:10.1f}")
    ours, theirs = runs[0][1], runs[1][1]
    print(f"on the bomb torch.load adds {theirs['added_mb']:.0f} MB and takes {theirs['seconds']:.1f} s; "
          f"read_checkpoint adds {ours['added_mb']:.1f} MB and takes {ours['seconds'] * 1000:.1f} ms")
    verdict = ours["added_mb"] < BOMB_RSS_TARGET
    print(f"refusing the bomb: +{ours['added_mb']:.1f} MB (target < {BOMB_RSS_TARGET:.0f}): "
          f"{'OK' if verdict else 'MISSED'}")
    return verdict


def measure(kind: str, folder: str) -> dict:
    """Run one measurement in a fresh interpreter; returns seconds, added_mb, peak_mb, tensors."""
    env = {**os.environ, "TRANSFORMERS_VERBOSITY": "error"}
    out = subprocess.run([sys.executable, "-c", CHILD.format(root=ROOT), kind, folder, json.dumps(CONFIG)],
                         capture_output=True, text=True, check=False, env=env)
    if out.returncode != 0:
        raise SystemExit(f"{kind} on {folder} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default=None, help="where to write the temporary checkpoints")
    parser.add_argument("--bomb-mib", type=int, default=1024, help="data.pkl size of the zip bomb (MiB)")
    parser.add_argument("--bomb-only", action="store_true", help="only the zip-bomb rows (no 2 GB write)")
    parser.add_argument("--write-into", default=None, help=argparse.SUPPRESS)  # the writer subprocess
    args = parser.parse_args()
    if args.write_into:
        print(json.dumps(write_checkpoints(args.write_into)))
        return 0
    folder = tempfile.mkdtemp(prefix="llmpdb-statediff-bench-", dir=args.dir)
    try:
        bomb_ok = bomb_rows(folder, args.bomb_mib)
        if args.bomb_only:
            return 0 if bomb_ok else 1
        started = time.perf_counter()
        out = subprocess.run([sys.executable, __file__, "--write-into", folder], capture_output=True, text=True,
                             check=False)
        if out.returncode != 0:
            raise SystemExit(f"writing the checkpoints failed:\n{out.stderr[-2000:]}")
        st_dir, bin_dir, total = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"wrote 2 × {total / 2**30:.2f} GiB ({len(os.listdir(st_dir)) - 1} shards each) "
              f"in {time.perf_counter() - started:.1f} s under {folder}")
        runs = [
            ("statediff (safetensors folder)", measure("statediff", st_dir)),
            ("safetensors.torch.load_file", measure("load_file", st_dir)),
            ("load_file + read", measure("load_file_read", st_dir)),
            ("statediff (.bin folder)", measure("statediff", bin_dir)),
            ("torch.load(weights_only=True)", measure("torch_load", bin_dir)),
        ]
        print(f"{'':34}{'seconds':>10}{'added MB':>11}{'peak MB':>10}{'tensors':>9}")
        for label, r in runs:
            print(f"{label:34}{r['seconds']:10.3f}{r['added_mb']:11.1f}{r['peak_mb']:10.1f}{r['tensors']:9d}")
        sd_st, load_st, read_st, sd_bin, load_bin = (r for _, r in runs)
        for label, ref, base in (("load_file", load_st, sd_st), ("load_file + read", read_st, sd_st),
                                 ("torch.load", load_bin, sd_bin)):
            print(f"{label} / statediff: {ref['seconds'] / base['seconds']:.1f}× the time, "
                  f"{ref['added_mb'] / max(base['added_mb'], 0.1):.1f}× the added memory")
        ok = True
        for label, r in (runs[0], runs[3]):
            verdict = r["seconds"] < TIME_TARGET and r["added_mb"] < RSS_TARGET
            ok &= verdict
            print(f"{label}: {r['seconds']:.3f} s (target < {TIME_TARGET}), +{r['added_mb']:.1f} MB "
                  f"(target < {RSS_TARGET:.0f}): {'OK' if verdict else 'MISSED'}")
        return 0 if ok and bomb_ok else 1
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        print(f"deleted {folder}")


if __name__ == "__main__":
    raise SystemExit(main())
