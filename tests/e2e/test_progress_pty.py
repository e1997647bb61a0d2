"""The progress bar in a real terminal: ``statediff`` over a 48-shard checkpoint under ``python -m llmpdb`` in a
pty draws the bar on standard error, then erases it: the report starts on a clean line."""

from __future__ import annotations

import os
import sys

import pexpect
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROMPT = r"\(llmpdb\) "
SHARDS = 48
SCRIPT = f"""
import torch
model = torch.nn.Sequential(*[torch.nn.Linear(2, 2) for _ in range({SHARDS})])
breakpoint()
print("done")
"""


def _checkpoint(folder) -> None:
    import json

    import torch
    from safetensors.torch import save_file

    model = torch.nn.Sequential(*[torch.nn.Linear(2, 2) for _ in range(SHARDS)])
    weight_map = {}
    for i in range(SHARDS):
        shard = f"model-{i + 1:05d}-of-{SHARDS:05d}.safetensors"
        part = {f"{i}.weight": model[i].weight.detach(), f"{i}.bias": model[i].bias.detach()}
        save_file(part, str(folder / shard))
        weight_map.update(dict.fromkeys(part, shard))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))


@pytest.mark.timeout(90)
def test_statediff_over_many_shards_draws_a_bar_and_leaves_a_clean_line(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    _checkpoint(ckpt)
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "NO_COLOR": "1", "TERM": "xterm", "PYTHONPATH": ROOT, "LLMPDB_PROGRESS_DELAY": "0"}
    env.pop("PYTHONBREAKPOINT", None)
    child = pexpect.spawn(sys.executable, ["-m", "llmpdb", str(script)], cwd=str(tmp_path), env=env,
                          encoding="utf-8", timeout=60, dimensions=(40, 100))
    try:
        child.expect(PROMPT)
        child.sendline("c")
        child.expect(r"-> print\(\"done\"\)")
        child.expect(PROMPT)
        child.sendline(f"statediff model {ckpt}")
        child.expect(r"model tensors match[^\r\n]*")
        out = child.before + child.after
        bar = out.index("\rstatediff: reading shards [")
        erase = out.index("\r\x1b[K", bar)
        drawn = out[bar:erase]
        assert f"/{SHARDS} " in drawn and "%" in drawn and "\n" not in drawn  # one line, redrawn in place
        report = out[erase + len("\r\x1b[K"):]
        assert "reading shards" not in report  # nothing of the bar after the erase
        assert report.lstrip("\r\n").startswith("statediff model ↔ ")
        assert f"{2 * SHARDS}/{2 * SHARDS} model tensors match" in report
        child.expect(PROMPT)
        child.sendline("c")
        child.expect(pexpect.EOF)
    finally:
        if child.isalive():
            child.terminate(force=True)
