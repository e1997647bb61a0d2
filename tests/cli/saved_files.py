"""Hand-made ``.safetensors`` files for the hostile tests of ``python -m llmpdb open`` (no llmpdb writer:
the header is whatever the test says, the data may be sparse).

Usage::

    craft(path, {"t": ("F32", [2])}, metadata={"llmpdb": json.dumps(doc)})   # real bytes
    craft(path, {"t": ("F32", [3 * 2**30 // 4])}, sparse=True)                 # 3 GiB claimed, none written
    out = run_open(path, ["p t", "q"], "--yes")   # CompletedProcess (stdin a pipe: nobody to answer)
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SIZES = {"F32": 4, "F16": 2, "BF16": 2, "U8": 1, "I64": 8, "BOOL": 1}


def craft(path, tensors: dict, *, metadata: dict | None = None, sparse: bool = False, cut: int = 0) -> int:
    """Write ``tensors`` ({name: (dtype, shape)}) one after another; the data are zeros (a hole when sparse)."""
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        size = _SIZES[dtype]
        for d in shape:
            size *= d
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    if metadata:
        header["__metadata__"] = metadata
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)) + raw)
        if sparse:
            fh.truncate(8 + len(raw) + offset - cut)
        else:
            fh.write(bytes(offset - cut))
    return offset


def env() -> dict:
    out = {k: v for k, v in os.environ.items() if not k.startswith("LLMPDB_")}
    out.update(PYTHONPATH=ROOT, NO_COLOR="1", COLUMNS="120", LLMPDB_TOUR="")
    return out


def run_open(path, commands, *options, cwd=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "llmpdb", "open", *options, str(path)],
                          input="\n".join(commands) + "\n", capture_output=True, text=True, timeout=timeout,
                          env=env(), cwd=cwd or ROOT)
