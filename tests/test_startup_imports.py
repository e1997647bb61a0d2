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


# Every module that imports inside a function, and why. A module that starts doing so without a reason here
# fails the test below: an import at the top is the rule, an import at first use the exception.
COMMAND_FIRST_USE = "the command's inspect/render/forward modules load when it first runs (start-up: HEAVY above)"
TORCH_ONLY_IF_USED = "torch is imported only when the program already imported it or the feature needs it"
IMPORTS_INSIDE_FUNCTIONS = {
    "llmpdb/__init__.py": "the public API and Pdb load on first access (`import llmpdb` stays cheap)",
    "llmpdb/api.py": "grads/tokens/trace/mem/show load their inspect/render/forward modules when first called (as the commands do)",
    "llmpdb/cli/parser.py": "--version and --listen's checks load the base and remote/ only when given",
    "llmpdb/ranks/timeouts.py": TORCH_ONLY_IF_USED,
    "llmpdb/base.py": "pdb++ or the standard pdb, whichever the base choice picks",
    "llmpdb/hooks.py": "the debugger class is built (and a stop's header wrapped) at the first stop, not at "
                       "`import llmpdb`",
    "llmpdb/breakpoints/__init__.py": "the engine loads when the debugger class is built",
    "llmpdb/breakpoints/catching.py": "sysconfig, only when a catch first meets a raise inside an import",
    "llmpdb/breakpoints/mixin.py": "only the engine this Python version and setting uses",
    "llmpdb/breakpoints/patching.py": "importlib's loader hooks, only when a breakpoint's module is not loaded yet",
    "llmpdb/cli/attach.py": "the client's line editor and sockets, only for `attach`",
    "llmpdb/headless/stop_signal.py": "the policy's state and the stop gate, when SIGUSR1 arrives (policy imports it)",
    "llmpdb/remote/cleanup.py": "multiprocessing's finalizers, only in a multiprocessing child that opened a listener",
    "llmpdb/cli/main.py": "each subcommand imports what it runs: `attach`, `open`, `--version` stay light",
    "llmpdb/cli/open_file.py": "the debugger class, once the file is read and checked",
    "llmpdb/commands/diverge.py": COMMAND_FIRST_USE,
    "llmpdb/commands/diverge_break.py": COMMAND_FIRST_USE,
    "llmpdb/commands/dump.py": COMMAND_FIRST_USE,
    "llmpdb/commands/explain.py": COMMAND_FIRST_USE,
    "llmpdb/commands/help.py": COMMAND_FIRST_USE,
    "llmpdb/commands/ide.py": "debugpy (an optional package) and its pydevd, and the address rule (socket, json), "
                              "only when `ide` runs",
    "llmpdb/debugger/stepping.py": "inspect.modules (three records), only when a step into a forward names it",
    "llmpdb/commands/grads.py": COMMAND_FIRST_USE,
    "llmpdb/commands/kv.py": COMMAND_FIRST_USE,
    "llmpdb/commands/mem.py": COMMAND_FIRST_USE,
    "llmpdb/commands/nan_break.py": COMMAND_FIRST_USE,
    "llmpdb/commands/navigation.py": COMMAND_FIRST_USE,
    "llmpdb/commands/shapes.py": COMMAND_FIRST_USE,
    "llmpdb/commands/show.py": COMMAND_FIRST_USE,
    "llmpdb/commands/statediff.py": COMMAND_FIRST_USE,
    "llmpdb/commands/tokens.py": COMMAND_FIRST_USE,
    "llmpdb/commands/trace.py": COMMAND_FIRST_USE,
    "llmpdb/commands/watching.py": COMMAND_FIRST_USE,
    "llmpdb/console/deferred.py": "prompt_toolkit loads in a thread once the first prompt is drawn",
    "llmpdb/console/history.py": "prompt_toolkit loads with the first terminal prompt",
    "llmpdb/console/keys.py": "prompt_toolkit loads with the first terminal prompt",
    "llmpdb/console/plain.py": "termios and GNU readline, only for the plain prompt on a terminal",
    "llmpdb/console/prompt.py": "prompt_toolkit and completion load with the first terminal prompt",
    "llmpdb/console/typeahead.py": "terminal ioctls and prompt_toolkit, after a line was read",
    "llmpdb/files/safetensors_file.py": TORCH_ONLY_IF_USED,
    "llmpdb/forward/diverge_variants.py": "the safetensors package, only for `diverge --vs ckpt=`",
    "llmpdb/headless/crash_report.py": "the version and base, only when a report is written",
    "llmpdb/headless/stop_lines.py": "the model's module stack, only for a logged stop's line",
    "llmpdb/headless/policy.py": "sockets (remote/) load only when the attach policy opens a listener",
    "llmpdb/hosts/ipython.py": "the debugger, at IPython's first %debug, not at %load_ext",
    "llmpdb/inspect/checkpoint.py": TORCH_ONLY_IF_USED,
    "llmpdb/inspect/pickle_globals.py": "pickletools and torch.serialization, only for a pickle checkpoint",
    "llmpdb/inspect/safetensors_header.py": "the safetensors package, only when a checkpoint header is read",
    "llmpdb/inspect/fingerprint.py": TORCH_ONLY_IF_USED,
    "llmpdb/inspect/fingerprint_batch.py": TORCH_ONLY_IF_USED,
    "llmpdb/inspect/snapshot.py": TORCH_ONLY_IF_USED,
    "llmpdb/inspect/stats.py": TORCH_ONLY_IF_USED,
    "llmpdb/ranks/mixin.py": "the job registry, only in a distributed job",
    "llmpdb/ranks/store.py": "torch.distributed and the store's sockets, only in a distributed job",
    "llmpdb/ranks/wait.py": "the step watchdog's thread, only when a step leaves ranks waiting",
    "llmpdb/render/config_file.py": "tomllib, only when a config file exists",
    "llmpdb/render/source.py": "pygments, only with colour on",
    "llmpdb/render/style.py": "unicodedata, only for text that is not ASCII",
    "llmpdb/render/table.py": "textwrap, only for a line that must wrap",
}


def _modules_importing_inside_functions() -> set[str]:
    import ast

    found = set()
    for folder, _, files in os.walk(os.path.join(ROOT, "llmpdb")):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as source:
                tree = ast.parse(source.read())
            functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            if any(isinstance(inner, (ast.Import, ast.ImportFrom)) for f in functions for inner in ast.walk(f)):
                found.add(os.path.relpath(path, ROOT).replace(os.sep, "/"))
    return found


def test_every_import_inside_a_function_has_a_reason():
    found = _modules_importing_inside_functions()
    assert sorted(found - set(IMPORTS_INSIDE_FUNCTIONS)) == [], "add the reason to IMPORTS_INSIDE_FUNCTIONS"
    assert sorted(set(IMPORTS_INSIDE_FUNCTIONS) - found) == [], "no longer imports inside a function: remove it"
