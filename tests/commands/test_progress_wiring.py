"""What feeds the progress bars of ``dump``/``snapshot``, ``statediff`` and ``diverge``: the callbacks are
called with real counts as the work advances (the bar itself: tests/render/test_progress.py; in a terminal:
tests/e2e/test_progress_pty.py)."""

from __future__ import annotations

import torch
from safetensors.torch import save_file

from llmpdb.files import safetensors_file
from llmpdb.forward.diverge import RunRecorder, hooked_modules
from llmpdb.inspect.checkpoint import read_checkpoint
from llmpdb.inspect.statediff import statediff


def test_writing_reports_bytes_after_each_chunk(tmp_path, monkeypatch):
    monkeypatch.setattr(safetensors_file, "_CHUNK", 64)  # 64-byte chunks: a 400-byte tensor is 7 of them
    seen = []
    size = safetensors_file.write_safetensors(str(tmp_path / "d.safetensors"),
                                              [("a", torch.zeros(100)), ("b", torch.ones(3, dtype=torch.int16))],
                                              progress=lambda done, total: seen.append((done, total)))
    assert seen[0] == (64, 406) and seen[-1] == (406, 406) and len(seen) == 8
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and size > 406


def test_reading_a_sharded_checkpoint_reports_each_shard(tmp_path):
    for i in range(3):
        save_file({f"w{i}": torch.zeros(2)}, str(tmp_path / f"part-{i}.safetensors"))
    seen = []
    info = read_checkpoint(tmp_path, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 3), (2, 3), (3, 3)] and len(info.tensors) == 3
    seen.clear()
    model = {"w0": torch.zeros(2), "w1": torch.zeros(2), "w2": torch.zeros(2)}
    assert statediff(model, str(tmp_path), progress=lambda *a: seen.append(a)).ok and seen[-1] == (3, 3)


def test_a_recorded_forward_reports_its_module_calls():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU(), torch.nn.Linear(2, 1))
    names = {id(m): n or "(root)" for n, m in model.named_modules()}
    recorder = RunRecorder(hooked_modules(model, names), 2**20)
    seen = []
    recorder.progress = seen.append
    with recorder.hooked(), torch.no_grad():
        model(torch.ones(1, 2))
    assert seen == [1, 2, 3, 4] and recorder.calls == 4
