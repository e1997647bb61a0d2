"""Under ``python -m llmpdb`` on 3.11 the script is compiled with guarded hooks (``llmpdb.breakpoints.guards``):
breakpoints set later in its running frames (module code, a ``main()`` on the stack) need no trace
function, and every session reads exactly as with pdb's own tracing (``LLMPDB_FAST_BREAKPOINTS=0``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from llmpdb.breakpoints import engine_kind
from llmpdb.breakpoints.guards import compile_guarded, is_guarded, reads_bytecode

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.skipif(engine_kind() != "hooks", reason="guards are the 3.11 hook engine's")

SCRIPT = '''\
import sys


def helper(n):
    total = 0
    for k in range(n):
        total += k
    return total


def main(rounds):
    out = []
    for i in range(rounds):
        value = helper(i)
        out.append(value)
        value += 1
    done = len(out)
    print("main trace", sys.gettrace())
    return out, done


squares = [j * j for j in range(4)]
for step in range(3):
    note = step * 10
    print("module trace", sys.gettrace())
    result = main(step + 2)
    print("step", step, result)
print("end", squares)
'''

SESSION = ["b 26", "c", "p step", "b 16, i == 2", "c", "p i, value", "n", "n", "n", "s", "s", "until", "r", "n",
           "tbreak 7", "c", "p k", "cl 2", "b helper", "c", "disable 3", "b 23", "c", "p squares", "j 26", "n",
           "cl", "y", "c"]


def _run(tmp_path, commands: list[str], fast: str) -> str:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": ROOT, "LLMPDB_FAST_BREAKPOINTS": fast, "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-m", "llmpdb", str(script)], input="\n".join(commands) + "\n",
                          capture_output=True, text=True, env=env, timeout=60, cwd=str(tmp_path))
    return re.sub(r"0x[0-9a-f]+", "0x?", done.stdout + done.stderr)


def test_breakpoints_in_the_running_script_need_no_trace_function(tmp_path):
    text = _run(tmp_path, ["b 26", "c", "b 17", "c", "cl 1", "cl 2", "b 23", "c", "c", "c", "c"], "1")
    stops = re.findall(r"script\.py\((\d+)\)(\S+)\(\)", text)
    assert stops == [("1", "<module>"), ("26", "<module>"), ("17", "main"), ("23", "<module>"), ("23", "<module>"),
                     ("23", "<module>")], text  # a breakpoint on the loop's own line: each back edge stops
    traces = re.findall(r"(module|main) trace (.*)", text)
    assert len(traces) == 6
    assert traces == [(kind, "None") for kind, _ in traces], text


def test_a_session_in_the_guarded_script_reads_as_with_pdb_tracing(tmp_path):
    stock = _run(tmp_path, SESSION, "0")
    fast = _run(tmp_path, SESSION, "1")
    stock = re.sub(r"module trace .*|main trace .*", "trace", stock)
    fast = re.sub(r"module trace .*|main trace .*", "trace", fast)
    assert fast == stock
    assert "script.py(23)<module>()" in fast and "script.py(5)helper()" in fast and "--Return--" in fast


def test_guarded_code_runs_as_compiled_and_hooks_nothing_unarmed():
    code = compile_guarded(SCRIPT.replace("sys.gettrace()", "0"), "/nowhere/script.py")
    assert is_guarded(code)
    nested = [c for c in code.co_consts if hasattr(c, "co_code")]
    assert nested and all(is_guarded(c) for c in nested)
    printed = []
    namespace = {"__name__": "guarded", "print": lambda *args: printed.append(args)}
    exec(code, namespace)
    assert printed[-1] == ("end", [0, 1, 4, 9])
    assert printed[-2] == ("step", 2, ([0, 0, 1, 3], 4))
    assert sys.gettrace() is None


@pytest.mark.parametrize("source, reads", [
    ("import torch\nf = torch.compile(g)\n", True),
    ("from torch import compile\n", True),
    ("model.compile()\n", True),
    ("import torch._dynamo\n", True),
    ("ep = torch.export.export(m, args)\n", True),
    ("args = TrainingArguments(out, torch_compile=True)\n", True),
    ("pattern = re.compile(r'\\d+')\n", False),
    ("out = model.generate(ids)\n", False),
])
def test_scripts_that_may_reach_dynamo_are_not_guarded(source, reads):
    assert reads_bytecode(source) is reads


def test_guarded_code_objects_stay_hashable():
    """A model's ``forward`` defined in the script is a guarded code object: torch, linecache and llmpdb key
    dicts by code objects (``stack-model`` failed with ``unhashable type: 'list'``)."""
    code = compile_guarded(SCRIPT, "/tmp/llmpdb-hashable-guards.py")
    tree, todo = [], [code]
    while todo:
        item = todo.pop()
        tree.append(item)
        todo.extend(c for c in item.co_consts if isinstance(c, type(code)))
    assert len(tree) >= 3 and all(is_guarded(item) for item in tree)
    assert {item: True for item in tree}  # every one hashes
    assert hash(code) == hash(code) and code == code
    namespace = {"__name__": "guarded"}
    exec(code, namespace)
    assert {namespace["helper"].__code__: 1}[namespace["helper"].__code__] == 1
