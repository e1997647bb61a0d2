"""Crash reports: an uncaught exception under ``python -m llmpdb`` with no terminal (or with ``--report``)
writes a report file and exits 1 at once, instead of waiting at a post-mortem prompt."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import time

import pytest

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(TESTS)

# A real shape error inside a module's forward: layer 1's down_proj gets a weight of the wrong size, so
# F.linear raises in Linear.forward (model.layers.1.mlp.down_proj); the script re-raises it from its own code.
SCRIPT = textwrap.dedent(
    f"""
    import sys
    sys.path.insert(0, {TESTS!r})
    import torch
    from tiny_models import tiny_llama

    def run_model(model):
        input_ids = torch.tensor([[1, 2, 3, 4]])
        with torch.no_grad():
            return model(input_ids=input_ids)

    model = tiny_llama()
    model.model.layers[1].mlp.down_proj.weight = torch.nn.Parameter(torch.zeros(64, 100))
    try:
        run_model(model)
    except RuntimeError as exc:
        raise ValueError("the model failed") from exc
    """
)
UNSET = ("LLMPDB_HEADLESS", "LLMPDB_LISTEN", "LLMPDB_REPORT", "LLMPDB_TOUR", "PYTHONBREAKPOINT", "CI", "RANK",
         "WORLD_SIZE")


def run_crashing(tmp_path, args=(), env=None, timeout=90):
    script = tmp_path / "crash.py"
    script.write_text(SCRIPT)
    full_env = {k: v for k, v in os.environ.items() if k not in UNSET}
    full_env.update({"NO_COLOR": "1", "PYTHONPATH": ROOT, **(env or {})})
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "llmpdb", *args, str(script)], stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, env=full_env, cwd=tmp_path, timeout=timeout)
    return result, time.monotonic() - started


def reports_in(directory):
    return sorted(p for p in directory.iterdir() if p.name.startswith("llmpdb-crash-"))


def test_no_terminal_writes_the_default_report_and_exits_at_once(tmp_path):
    result, _ = run_crashing(tmp_path)
    assert result.returncode == 1
    assert "ValueError: the model failed" in result.stderr  # the traceback, as before
    assert "post-mortem" not in result.stdout + result.stderr  # no post-mortem prompt, no attach wait
    assert "waiting" not in result.stderr
    [report] = reports_in(tmp_path)
    assert report.name.startswith("llmpdb-crash-") and report.name.endswith(".txt")
    assert f"llmpdb: crash report written to {report}" in result.stderr.splitlines()
    assert stat.S_IMODE(report.stat().st_mode) == 0o600
    text = report.read_text()
    assert text.startswith("llmpdb crash report\n")
    assert "rank:     none (not a distributed job)" in text
    assert f"Python {sys.version.split()[0]}, torch " in text
    # where it was raised, with the module path, and the whole chain as traceback prints it
    [origin] = [line for line in text.splitlines() if line.startswith("  from:   ")]
    assert origin.startswith(f"  from:   {torch_linear_file()}:")
    assert origin.endswith(" Linear.forward() · model.layers.1.mlp.down_proj (Linear)")
    assert "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x128 and 100x64)" in text
    assert "The above exception was the direct cause of the following exception:" in text
    chain = text.split("== traceback ==\n")[1]
    assert chain.index("RuntimeError: mat1") < chain.index("direct cause") < chain.index("ValueError: the model")
    # stack-model of the failing forward: the module rows, the failing one marked
    assert "== stack-model: RuntimeError: mat1" in text
    assert [line.split()[1:3] for line in text.splitlines() if line.startswith(">#")] == [
        ["model.layers.1.mlp.down_proj", "Linear"], ["<module>()", "crash.py:17"]]
    assert " model.layers.1.mlp            LlamaMLP " in text
    # shapes of each program frame, dims named from the model's config
    frames = text.split("== shapes: the frames of RuntimeError")[1]
    assert "LlamaMLP.forward() · model.layers.1.mlp (LlamaMLP)\npath  shape       dtype     size  dims\n" \
           "x     (1, 4, 64)  f32    1.0 KiB  batch · ? · hidden" in frames
    assert "Linear.forward() · model.layers.1.mlp.down_proj (Linear)\npath   shape        dtype     size  dims\n" \
           "input  (1, 4, 128)  f32    2.0 KiB  batch · ? · intermediate" in frames
    assert "run_model()\npath       shape   dtype  size  dims\ninput_ids  (1, 4)  i64    32 B  batch · seq" in frames
    assert "plumbing frames not shown: Module._wrapped_call_impl, Module._call_impl" in frames
    assert "cli.py" not in text and "bdb.py" not in text  # llmpdb's and bdb's frames are left out
    # the frames ended under no_grad: the report does not claim the grad mode of the time after
    assert "path: eval, grad/autocast ? (the frame ended)" in text


def torch_linear_file() -> str:
    import torch.nn.modules.linear as linear

    return linear.__file__


def test_llmpdb_report_names_the_file_and_the_rank(tmp_path):
    target = tmp_path / "reports" / "crash.txt"
    target.parent.mkdir()
    result, _ = run_crashing(tmp_path, env={"LLMPDB_REPORT": str(target), "RANK": "1", "WORLD_SIZE": "2"})
    assert result.returncode == 1
    assert f"llmpdb: crash report written to {target}" in result.stderr
    assert "rank:     1 of 2" in target.read_text()
    assert not reports_in(tmp_path)
    assert [p.name for p in target.parent.iterdir()] == ["crash.txt"]  # no temporary file left behind


def test_an_explicit_attach_policy_offers_the_wait_after_writing_the_report(tmp_path):
    result, _ = run_crashing(tmp_path, env={"LLMPDB_HEADLESS": "attach", "LLMPDB_ATTACH_TIMEOUT": "1",
                                            "XDG_RUNTIME_DIR": str(tmp_path)})
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    written = next(i for i, line in enumerate(lines) if line.startswith("llmpdb: crash report written to"))
    waited = next(i for i, line in enumerate(lines) if "waiting 1 s for a client" in line)
    assert written < waited
    assert "no client attached within 1 s" in result.stderr
    assert len(reports_in(tmp_path)) == 1


@pytest.mark.parametrize("kind", ["directory", "symlink", "fifo"])
def test_a_bad_report_path_is_one_line_and_still_exit_1(tmp_path, kind):
    path = tmp_path / "bad"
    victim = tmp_path / "victim.txt"
    if kind == "directory":
        path.mkdir()
    elif kind == "symlink":
        victim.write_text("keep me")
        path.symlink_to(victim)
    else:
        os.mkfifo(path)
    result, elapsed = run_crashing(tmp_path, ["--report", str(path)])
    assert result.returncode == 1
    reason = {"directory": "a directory", "symlink": "a symbolic link (not followed)", "fifo": "a FIFO"}[kind]
    assert f"llmpdb: no crash report: cannot write {path}: it is {reason}" in result.stderr.splitlines()
    assert "Traceback (most recent call last):" in result.stderr
    assert "ValueError: the model failed" in result.stderr
    assert not reports_in(tmp_path)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".bad")] == []
    if kind == "symlink":
        assert path.is_symlink() and victim.read_text() == "keep me"


def test_report_replaces_an_existing_regular_file(tmp_path):
    path = tmp_path / "old.txt"
    path.write_text("old report")
    os.chmod(path, 0o644)
    result, _ = run_crashing(tmp_path, ["--report", str(path)])
    assert result.returncode == 1
    assert path.read_text().startswith("llmpdb crash report\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
