"""Time reading a 100k-tensor safetensors header: llmpdb's reader next to ``safe_open`` and llmpdb's own parser.

Usage::

    python bench/safetensors_header_bench.py               # 100,000 tensors, best of 5 runs each
    python bench/safetensors_header_bench.py --tensors 20000 --runs 3

One file, written once to a temp dir (every tensor 2×2 float32: the header is ~8 MB, the data 1.6 MB):

* ``read_header``: what ``statediff``/``diverge --vs ckpt=`` run: llmpdb's checks (regular file, header
  length, the header read), then the safetensors library reads names, shapes and dtypes from a private
  sparse copy of the header (a temp file);
* ``safe_open``: the library alone (``keys()``, then ``get_slice(k).get_dtype()/get_shape()`` for each);
* ``llmpdb parser``: ``read_header(use_library=False)``: llmpdb's own parser, every field checked in Python.

* ``read_safetensors`` (mapped): what ``python -m llmpdb open`` loads, every tensor rebuilt as a view of
  the mapped file after llmpdb's own parser checked the header;
* ``load_file``: ``safetensors.torch.load_file``, the library loading every tensor.

The ratios show what llmpdb's guards cost on top of the library (target: within 1.3×), what the library
saves against llmpdb's own parser, and what ``open``'s load costs against the library's. Timings are the
minimum of ``--runs`` runs (the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from safetensors import safe_open  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

from llmpdb.files.safetensors_file import read_safetensors  # noqa: E402
from llmpdb.inspect.safetensors_header import read_header  # noqa: E402


def write(path: str, count: int) -> None:
    header, offset = {}, 0
    for i in range(count):
        header[f"model.layers.{i // 10}.mlp.w{i % 10}.weight"] = {"dtype": "F32", "shape": [2, 2],
                                                                 "data_offsets": [offset, offset + 16]}
        offset += 16
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)) + raw + bytes(offset))


def library_alone(path: str) -> int:
    with safe_open(path, framework="pt") as handle:
        found = {}
        for key in handle.keys():
            part = handle.get_slice(key)
            found[key] = (part.get_dtype(), part.get_shape())
    return len(found)


def best(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tensors", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "many.safetensors")
        write(path, args.tensors)
        assert len(read_header(path).tensors) == library_alone(path) == args.tensors
        assert read_header(path).reader.startswith("safetensors")
        ours = best(lambda: read_header(path), args.runs)
        alone = best(lambda: library_alone(path), args.runs)
        parser_only = best(lambda: read_header(path, use_library=False), args.runs)
        assert len(read_safetensors(path, mapped=True)[0]) == len(load_file(path)) == args.tensors
        opened = best(lambda: read_safetensors(path, mapped=True), args.runs)
        loaded = best(lambda: load_file(path), args.runs)
    print(f"{args.tensors:,} tensors, best of {args.runs}:")
    print(f"  read_header (llmpdb checks + library)  {ours:7.3f} s")
    print(f"  safe_open alone                         {alone:7.3f} s")
    print(f"  llmpdb's own parser                     {parser_only:7.3f} s")
    print(f"  read_header / safe_open      = {ours / alone:5.2f}x  (target <= 1.3x)")
    print(f"  read_safetensors (open's load) {opened:7.3f} s")
    print(f"  load_file (the library)         {loaded:7.3f} s")
    print(f"  llmpdb parser / read_header  = {parser_only / ours:5.2f}x  (what the library saves)")
    print(f"  read_safetensors / load_file = {opened / loaded:5.2f}x  (open's load against the library's)")


if __name__ == "__main__":
    main()
