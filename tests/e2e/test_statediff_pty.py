"""``statediff`` typed in a real terminal: ``python -m llmpdb examples/train.py`` under pexpect.

examples/train.py freezes the token embedding, stops before the first ``loss.backward()`` and again before
``torch.save``: a snapshot at the first stop and a comparison at the second must show the embedding
unchanged (frozen) and everything else changed; the checkpoint dict and then the saved file must match.
"""

from __future__ import annotations

import os
import re
import sys

import pexpect
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROMPT = r"\(llmpdb\) "
ANSI = re.compile(r"\x1b(\[[0-9;?]*[A-Za-z@]|[=>])")


def _spawn(out_dir):
    env = {**os.environ, "NO_COLOR": "1", "TERM": "xterm", "PYTHONPATH": ROOT, "TRANSFORMERS_VERBOSITY": "error",
           "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("PYTHONBREAKPOINT", None)
    child = pexpect.spawn(sys.executable, ["-m", "llmpdb", "examples/train.py", str(out_dir)], cwd=ROOT, env=env,
                          encoding="utf-8", timeout=60, dimensions=(50, 100))
    child.expect(PROMPT)
    return child


def _run(child, line: str) -> str:
    child.sendline(line)
    child.expect(PROMPT)
    return ANSI.sub("", child.before.replace("\r\n", "\n"))


@pytest.mark.timeout(120)
def test_statediff_snapshot_and_checkpoint_forms_in_a_pty(tmp_path):
    child = _spawn(tmp_path)
    try:
        assert "loss.backward()" in _run(child, "c")  # stop 1: before the first backward
        snap = _run(child, "statediff snap before")
        assert "snapshot before of model (LlamaForCausalLM) at stop" in snap and "fingerprints" in snap
        assert "torch.save(checkpoint, path)" in _run(child, "c")  # stop 2: after 3 steps, before the save

        diff = _run(child, "statediff before")
        assert "changed: " in diff
        assert "  model.embed_tokens.weight  frozen (requires_grad=False)" in diff
        lines = diff.splitlines()
        changed = lines[next(i for i, l in enumerate(lines) if l.startswith("changed: ")) + 1:
                        next(i for i, l in enumerate(lines) if l.startswith("unchanged: "))]
        assert changed and not any("embed_tokens" in l for l in changed)
        assert any(l.lstrip().startswith("model.layers.") for l in changed)

        same = _run(child, "statediff")  # no name: the last snapshot
        assert same.split("\n", 1)[1] == diff.split("\n", 1)[1]

        expr = _run(child, "statediff model checkpoint")  # the dict about to be saved, weights nested
        assert "statediff model ↔ checkpoint (state dict, " in expr and "under `model_state_dict`" in expr
        assert " model tensors match in name, shape and dtype" in expr and "missing" not in expr

        _run(child, "n")  # runs torch.save
        path = tmp_path / "checkpoint.pt"
        assert path.exists()
        saved = _run(child, f"statediff model {path}")
        assert "(pickle, 1 file, " in saved and "under `model_state_dict`" in saved
        verdict = next(l for l in saved.splitlines() if "model tensors match" in l)
        matched, total = verdict.split()[0].split("/")
        assert matched == total or "tied, stored once" in verdict

        child.sendline("c")
        child.expect(pexpect.EOF)
        assert "done" in child.before
    finally:
        if child.isalive():
            child.terminate(force=True)


@pytest.mark.timeout(120)  # a FIFO that is opened blocks: the timeout fails the test instead of hanging CI
def test_hostile_checkpoints_and_a_vanished_snapshot_in_a_pty(tmp_path):
    import zipfile

    os.mkfifo(tmp_path / "pipe.pt")
    with zipfile.ZipFile(tmp_path / "bomb.pt", "w", compression=zipfile.ZIP_DEFLATED) as zf:
        with zf.open("archive/data.pkl", "w") as member:
            for _ in range(64):
                member.write(bytes(2**20))
    with open(tmp_path / "shell.pt", "wb") as fh:  # what torch.save writes for os.system, protocol 2
        fh.write(b"\x80\x02}q\x00X\x01\x00\x00\x00wq\x01cposix\nsystem\nq\x02X\x05\x00\x00\x00touchq\x03\x85q\x04Rq\x05s.")
    child = _spawn(tmp_path)
    try:
        assert "loss.backward()" in _run(child, "c")
        assert _run(child, f"statediff model {tmp_path / 'pipe.pt'}").strip().splitlines()[-1] == (
            "*** statediff: pipe.pt: refused: a FIFO (named pipe), not a regular file (reading it could block "
            "forever)")
        bomb = _run(child, f"statediff model {tmp_path / 'bomb.pt'}").strip().splitlines()[-1]
        assert bomb.startswith("*** statediff: bomb.pt: refused: archive/data.pkl inflates to 64.0 MiB from ")
        assert _run(child, f"statediff model {tmp_path / 'shell.pt'}").strip().splitlines()[-1] == (
            "*** statediff: shell.pt: refused: this pickle would run code (os.system); `--unsafe-trusted` loads it")
        snap = _run(child, "statediff snap fresh type(model)(model.config)")
        assert "snapshot fresh of type(model)(model.config) (LlamaForCausalLM)" in snap
        assert _run(child, "statediff fresh").strip().splitlines()[-1] == (
            "*** statediff: the LlamaForCausalLM snapped as fresh (type(model)(model.config)) no longer exists; "
            "statediff compares the object snapped and does not evaluate `type(model)(model.config)` again")
        child.sendline("c")
        child.sendline("c")
        child.expect(pexpect.EOF)
        assert "done" in child.before
    finally:
        if child.isalive():
            child.terminate(force=True)
