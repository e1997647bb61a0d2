"""Start-up stays light: importing the debugger, and ``python -m llmpdb`` up to its first prompt, loads none
of the command families' heavy modules (they are imported by the command that uses them), nor pygments,
prompt_toolkit or torch (imported when colour, a terminal prompt or the program needs them).

The figures are measured by ``bench/startup_bench.py``; these tests only say which modules are loaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS)

# Each is imported at first use by the command (or feature) named beside it.
HEAVY = (
    "llmpdb.forward.diverge",            # diverge
    "llmpdb.forward.diverge_variants",   # diverge
    "llmpdb.forward.one_shot",           # diverge --break
    "llmpdb.inspect.diverge_records",    # diverge
    "llmpdb.inspect.checkpoint",         # diverge --vs ckpt=, statediff
    "llmpdb.render.diverge",             # diverge
    "llmpdb.inspect.memory",             # mem
    "llmpdb.render.memory",              # mem
    "llmpdb.inspect.kv",                 # mem, kv
    "llmpdb.inspect.heatmap",            # show
    "llmpdb.render.heatmap",             # show
    "llmpdb.files.safetensors_file",     # dump, snapshot
    "llmpdb.inspect.frame_snapshot",     # dump, snapshot
    "llmpdb.inspect.tensor_paths",       # dump, snapshot, shapes
    "llmpdb.inspect.tensors",            # shapes
    "llmpdb.console.completion",                 # TAB at the terminal prompt
    "llmpdb.ranks.jobs",                  # the first stop of a distributed job
    "llmpdb.remote.listener",                     # a listener opens
    "pygments",                          # colour
    "prompt_toolkit",                    # the terminal prompt
    "torch",
    "numpy",
    "transformers",
    "safetensors",
)

PROBE = "import json, sys; print('LOADED=' + json.dumps(sorted(m for m in sys.modules if m in {heavy})))"
UNSET = ("LLMPDB_HEADLESS", "LLMPDB_LISTEN", "LLMPDB_REPORT", "LLMPDB_TOUR", "PYTHONBREAKPOINT", "RANK",
         "WORLD_SIZE", "LLMPDB_CONFIG")


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env.update({"PYTHONPATH": ROOT, "NO_COLOR": "1", "PDBPP_HIJACK_PDB": "0"})
    return env


def _loaded(output: str) -> list[list[str]]:
    return [json.loads(line.split("LOADED=", 1)[1]) for line in output.splitlines() if "LOADED=" in line]


def test_importing_the_debugger_loads_no_heavy_module():
    probe = PROBE.format(heavy=set(HEAVY))
    done = subprocess.run([sys.executable, "-c", f"import llmpdb.commands, llmpdb.debugger.core; {probe}"],
                          capture_output=True, text=True, env=_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    assert _loaded(done.stdout) == [[]]


def test_first_prompt_loads_no_heavy_module_and_a_command_imports_its_own(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text(textwrap.dedent("""\
        values = [3, 1, 2]
        print("sum", sum(values))
        """))
    probe = PROBE.format(heavy=set(HEAVY))
    typed = f"!{probe}\nn\ndump values {tmp_path / 'none.safetensors'}\n!{probe}\nc\n"
    done = subprocess.run([sys.executable, "-m", "llmpdb", str(script)], input=typed, capture_output=True,
                          text=True, env=_env(), cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "sum 6" in done.stdout
    at_prompt, after_dump = _loaded(done.stdout)
    assert at_prompt == []
    # dump ran (a list of ints holds no tensor: it says so) and imported what it uses, torch not included
    assert "nothing to write" in done.stdout
    assert {"llmpdb.inspect.tensor_paths", "llmpdb.inspect.frame_snapshot"} <= set(after_dump)
    assert "torch" not in after_dump
