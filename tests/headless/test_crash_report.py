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
# The same chained failure without torch, for the tests of where the report goes (torch's start-up is most
# of a run, and nothing about the model is asserted there).
PLAIN_SCRIPT = textwrap.dedent(
    """
    def run_model():
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied (4x128 and 100x64)")

    try:
        run_model()
    except RuntimeError as exc:
        raise ValueError("the model failed") from exc
    """
)
UNSET = ("LLMPDB_HEADLESS", "LLMPDB_LISTEN", "LLMPDB_REPORT", "LLMPDB_TOUR", "PYTHONBREAKPOINT", "CI", "RANK",
         "WORLD_SIZE")


def run_crashing(tmp_path, args=(), env=None, timeout=90, source=SCRIPT):
    script = tmp_path / "crash.py"
    script.write_text(source)
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
    result, elapsed = run_crashing(tmp_path, ["--report", str(path)], source=PLAIN_SCRIPT)
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
    result, _ = run_crashing(tmp_path, ["--report", str(path)], source=PLAIN_SCRIPT)
    assert result.returncode == 1
    assert path.read_text().startswith("llmpdb crash report\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


# ---- hostile exceptions: deep chains, deep tracebacks, huge messages, overriding properties ----------------

def run_script(tmp_path, source, args=(), timeout=60, stderr=subprocess.PIPE):
    script = tmp_path / "hostile.py"
    script.write_text(textwrap.dedent(source))
    full_env = {k: v for k, v in os.environ.items() if k not in UNSET}
    full_env.update({"NO_COLOR": "1", "PYTHONPATH": ROOT})
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "llmpdb", *args, str(script)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=stderr, env=full_env, cwd=tmp_path, timeout=timeout)
    return result, time.monotonic() - started


DEEP_CHAIN = """
    exc = None
    for i in range(3000):
        try:
            if exc is None:
                raise ValueError("the root cause")
            raise RuntimeError(f"level {i}") from exc
        except Exception as caught:
            exc = caught
    raise exc
"""


def test_a_3000_deep_exception_chain_is_reported_in_bounded_time_and_size(tmp_path):
    report = tmp_path / "report.txt"
    result, elapsed = run_script(tmp_path, DEEP_CHAIN, ["--report", str(report)], timeout=90)
    assert result.returncode == 1
    assert b"RuntimeError: level 2999" in result.stderr
    assert f"llmpdb: crash report written to {report}".encode() in result.stderr.splitlines()
    assert elapsed < 45  # it was cubic: depth 400 took 71 s
    text = report.read_text()
    assert len(text) < 200_000
    chain = text.split("== traceback ==\n")[1].split("\n== ")[0]
    assert "ValueError: the root cause" in chain and "RuntimeError: level 2999" in chain  # both ends kept
    assert "[... 2,975 chained exceptions left out ...]" in chain
    assert "(2,975 more chained exceptions left out)" in text  # the header's list of locations too
    assert chain.count("The above exception was the direct cause") == 23


DEEP_RECURSION = """
    import sys
    sys.setrecursionlimit(1100)
    def down(n):
        return down(n + 1) if n % 2 else up(n + 1)
    def up(n):
        return down(n + 1)
    down(0)
"""


def test_a_very_deep_traceback_stays_fast_and_bounded(tmp_path):
    report = tmp_path / "report.txt"
    result, elapsed = run_script(tmp_path, DEEP_RECURSION, ["--report", str(report)], timeout=90)
    assert result.returncode == 1
    assert b"RecursionError: maximum recursion depth exceeded" in result.stderr
    assert elapsed < 45
    text = report.read_text()
    assert len(text) < 300_000
    chain = text.split("== traceback ==\n")[1].split("\n== ")[0]
    assert "frames left out ...]" in chain and chain.rstrip().endswith("maximum recursion depth exceeded")
    assert "outer frames left out)" in text  # stack-model shows the innermost frames
    assert "frames not shown: the report shows the shapes of 60 frames" in text


HUGE_MESSAGE = """
    raise ValueError("HEAD" + "x" * 50_000_000 + "TAIL")
"""


def test_a_50_mb_message_is_cut_in_the_report(tmp_path):
    report = tmp_path / "report.txt"
    result, _ = run_script(tmp_path, HUGE_MESSAGE, ["--report", str(report)], timeout=90,
                           stderr=subprocess.DEVNULL)
    assert result.returncode == 1
    size = report.stat().st_size
    assert size < 100_000  # it held the message four times: 200 MB
    text = report.read_text()
    assert "ValueError: HEADxxx" in text and "xxxTAIL" in text
    assert "[... 49,996,008 characters cut ...]" in text


HOSTILE = """
    import os
    def touch(name):
        open(os.path.join(os.path.dirname(os.path.abspath(__file__)), name), "w").close()

    class Hostile(Exception):
        @property
        def __traceback__(self):
            touch("touched-traceback")
            raise RuntimeError("gotcha traceback")
        @property
        def __cause__(self):
            touch("touched-cause")
            raise RuntimeError("gotcha cause")
        @property
        def __context__(self):
            touch("touched-context")
            raise RuntimeError("gotcha context")
        @property
        def __suppress_context__(self):
            touch("touched-suppress")
            raise RuntimeError("gotcha suppress")
        def __str__(self):
            raise KeyboardInterrupt("gotcha str")

    def fail():
        try:
            {}["missing"]
        except KeyError as exc:
            raise Hostile("x") from exc
    fail()
"""


def test_an_exception_whose_properties_raise_still_gets_its_traceback_and_report(tmp_path):
    report = tmp_path / "report.txt"
    result, _ = run_script(tmp_path, HOSTILE, ["--report", str(report)])
    stderr = result.stderr.decode()
    assert result.returncode == 1
    assert "gotcha" not in stderr and "llmpdb/" not in stderr  # no llmpdb traceback
    assert f"llmpdb: crash report written to {report}" in stderr.splitlines()
    assert "Hostile: <exception str() failed>" in stderr  # as plain python prints it
    assert "KeyError: 'missing'" in stderr and "direct cause" in stderr
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith("touched")]  # no property ran
    text = report.read_text()
    assert "location: " in text and "hostile.py:" in text and "fail()" in text
    assert "Hostile: <exception str() failed>" in text and "KeyError: 'missing'" in text
    assert "could not be made" not in text


def test_report_to_dev_full_is_one_line_and_exit_1(tmp_path):
    result, _ = run_crashing(tmp_path, ["--report", "/dev/full"], source=PLAIN_SCRIPT)
    assert result.returncode == 1
    assert "llmpdb: no crash report: cannot write /dev/full: it is a character device" in result.stderr.splitlines()
    assert "ValueError: the model failed" in result.stderr
    assert "Traceback (most recent call last):" in result.stderr
    assert "OSError" not in result.stderr


def test_a_full_stderr_still_writes_the_report_and_exits_1(tmp_path):
    report = tmp_path / "report.txt"
    with open("/dev/full", "w") as full:
        result, _ = run_script(tmp_path, "raise ValueError('boom')\n", ["--report", str(report)], stderr=full)
    assert result.returncode == 1
    assert "ValueError: boom" in report.read_text()
