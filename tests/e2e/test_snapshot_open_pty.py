"""`snapshot` written at a module stop by one process (headless, --snapshot), opened by another that never
imports transformers: `python -m llmpdb open FILE` in a real pty. A damaged file is refused with one line."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from .pty_session import ROOT, PtySession

pytestmark = pytest.mark.timeout(240)

SCRIPT = textwrap.dedent(f"""
    import sys, torch
    sys.path.insert(0, {os.path.join(ROOT, 'tests')!r})
    from tiny_models import tiny_llama
    model = tiny_llama()
    with torch.no_grad():
        out = model(input_ids=torch.tensor([[1, 2, 3]]))
""")


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMPDB_")}
    env.update(PYTHONPATH=ROOT, NO_COLOR="1", COLUMNS="120", LLMPDB_TOUR="", **extra)
    return env


@pytest.fixture(scope="module")
def snapshot_file(tmp_path_factory):
    folder = tmp_path_factory.mktemp("snap")
    (folder / "work.py").write_text(SCRIPT)
    done = subprocess.run([sys.executable, "-m", "llmpdb", "--headless", "log", "--snapshot",
                           "-c", "bm model.layers.1.self_attn --once", "-c", "c", "work.py"],
                          cwd=folder, env=_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    files = [p for p in os.listdir(folder) if p.startswith(f"llmpdb-snapshot-") and p.endswith(".safetensors")]
    assert len(files) == 1, (files, done.stdout)
    assert f"snapshot: wrote 6 tensors" in done.stdout and str(folder / files[0]) in done.stdout
    return folder / files[0]


def test_open_shows_shapes_stack_and_kv_without_transformers(snapshot_file):
    with PtySession(["-m", "llmpdb", "open", str(snapshot_file)], env={"PYTHONPATH": ROOT}) as s:
        banner = s.wait_prompt()
        assert "a snapshot of" in banner and "LlamaAttention.forward()" in banner and "6 tensors" in banner
        assert s.run('p "transformers" in __import__("sys").modules').strip() == "False"
        assert s.run('p __import__("torch").cuda.is_initialized()').strip() == "False"
        shapes = {line.split()[0]: line for line in s.run("shapes").splitlines() if line.strip()}
        assert "(1, 3, 64)" in shapes["hidden_states"]
        assert "(1, 2, 3, 16)" in shapes["cache.layers[0].keys"]
        # the names the live stop gave (its config: GQA), not 'heads' from the sizes alone
        assert shapes["cache.layers[0].keys"].endswith("batch · kv_heads · seq · head_dim")
        assert shapes["hidden_states"].endswith("batch · seq · hidden")
        stack = s.run("stack-model")
        assert stack.splitlines()[0].endswith("| model.layers.1.self_attn (LlamaAttention)"), stack
        rows = {line.split()[0]: line.split()[1:3] for line in stack.splitlines() if line.lstrip().startswith(">#")}
        assert list(rows.values()) == [["model.layers.1.self_attn", "LlamaAttention"]], stack
        assert "model.layers.1  " in stack and "LlamaDecoderLayer" in stack
        assert "a record, not live frames" in stack
        kv = s.run("kv")
        assert kv.startswith("cache: DynamicCache  2 layers"), kv
        assert s.run("p hidden_states.shape").strip() == "torch.Size([1, 3, 64])"
        s.finish("c")
    assert s.exitstatus == 0


def test_a_damaged_file_is_refused_with_one_line(snapshot_file, tmp_path):
    data = bytearray(snapshot_file.read_bytes())
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(data[:8] + data[8:40].replace(b'"', b"#", 3) + data[40:])
    short = tmp_path / "short.safetensors"
    short.write_bytes(data[: len(data) - 100])
    for path in (bad, short):
        done = subprocess.run([sys.executable, "-m", "llmpdb", "open", str(path)], cwd=ROOT, env=_env(),
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        assert done.returncode == 1, done.stdout + done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"llmpdb open: {path.name}: "), done.stderr
        assert done.stdout == ""


def test_headless_snapshot_over_the_limit_is_refused_with_one_line(tmp_path):
    (tmp_path / "work.py").write_text(SCRIPT)
    done = subprocess.run([sys.executable, "-m", "llmpdb", "--headless", "log", "--snapshot",
                           "-c", "bm model.layers.0.self_attn --once", "-c", "c", "work.py"],
                          cwd=tmp_path, env=_env(LLMPDB_DUMP_MAX_MIB="0.0001"), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    refusals = [line for line in done.stdout.splitlines() if line.startswith("*** snapshot: refused")]
    assert len(refusals) == 1 and "over the 0.0001 MiB limit and nobody can confirm" in refusals[0], done.stdout
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".safetensors") or ".tmp-" in p]


def test_headless_snapshots_are_rate_limited_like_the_log(tmp_path):
    (tmp_path / "loop.py").write_text("import torch\nfor i in range(12):\n    x = torch.ones(2) * i\n    breakpoint()\n")
    done = subprocess.run([sys.executable, "-m", "llmpdb", "--headless", "log", "--snapshot", "-c", "c", "loop.py"],
                          cwd=tmp_path, env=_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    files = sorted(p for p in os.listdir(tmp_path) if p.endswith(".safetensors"))
    assert len(files) == 10, files  # the first 10 hits of the site are logged; the 11th and 12th are not
    from llmpdb.files.safetensors_file import read_safetensors

    values = sorted(read_safetensors(str(tmp_path / f))[0]["x"][0].item() for f in files)
    assert values == [float(i) for i in range(10)]
