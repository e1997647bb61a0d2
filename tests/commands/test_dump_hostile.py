"""Hostile cases of `dump`, `snapshot` and `python -m llmpdb open`: quoted paths with spaces, tied weights
kept as one tensor under both names, a path inside another path's tensor, stepping refused on a file."""

from __future__ import annotations

import os
import subprocess
import sys

import torch

from llmpdb.files.safetensors_file import read_safetensors, write_safetensors
from llmpdb.inspect.tensor_paths import nest_paths
from tiny_models import tiny_gpt2
from transcript import debug_transcript, outputs_of


def _stop(t=None, model=None):
    breakpoint()
    return t, model


def test_a_quoted_path_with_spaces_is_written(tmp_path):
    folder = tmp_path / "my dir"
    folder.mkdir()
    t = torch.arange(4.0)
    out = outputs_of(debug_transcript(_stop, ["c", f"dump t '{folder}/a b.safetensors'",
                                                 f'snapshot "{folder}/s p.safetensors"', "c"], t=t))
    assert "wrote 1 tensor" in out[0], out[0]
    assert "snapshot: wrote" in out[1], out[1]
    loaded, _ = read_safetensors(str(folder / "a b.safetensors"))
    assert torch.equal(loaded["t"], t)
    assert os.path.exists(folder / "s p.safetensors")


def _open(path, commands):
    env = dict(os.environ, PYTHONPATH=os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "llmpdb", "open", str(path)], input="\n".join(commands) + "\n",
                          capture_output=True, text=True, timeout=120, env=env).stdout


def test_tied_gpt2_weights_are_one_tensor_under_both_names_in_open(tmp_path):
    model = tiny_gpt2()
    assert model.lm_head.weight is model.transformer.wte.weight
    target = tmp_path / "gpt2.safetensors"
    debug_transcript(_stop, ["c", f"dump model {target}", "c"], model=model)
    loaded, _ = read_safetensors(str(target))
    assert "model.lm_head.weight" not in loaded and "model.transformer.wte.weight" in loaded  # written once
    out = _open(target, ["p model.lm_head.weight is model.transformer.wte.weight",
                         "p torch.equal(model.lm_head.weight, model.transformer.wte.weight)", "q"])
    assert out.count("True") == 2, out


def test_a_path_inside_another_paths_tensor_is_kept_whole():
    x, y = torch.ones(1), torch.zeros(2)
    tree = nest_paths({"x": x, "x.y": y, "a.b": y})
    assert tree["x"] is x and tree["x.y"] is y and tree["a"].b is y


def test_stepping_on_a_saved_file_is_refused_with_one_line(tmp_path):
    target = tmp_path / "plain.safetensors"
    write_safetensors(str(target), [("t", torch.ones(2))])
    out = _open(target, ["n", "s", "restart", "unt", "r", "p t.sum()", "q"])
    for name in ("next", "step", "run", "until", "return"):
        assert f"*** {name}: nothing runs here" in out, out
    assert "tensor(2.)" in out, out
