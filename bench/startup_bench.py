"""Start-up and import-through cost of ``python -m llmpdb`` against stdlib pdb and pdb++, side by side.

Usage::

    python bench/startup_bench.py                   # both rows, 5 interleaved rounds
    python bench/startup_bench.py --rounds 7 --only prompt     # the two first-prompt rows

Rows (each a whole process, wall time, median over rounds; the ratio is to stdlib pdb of the same round):

- ``first prompt in a terminal``: ``examples/infer.py`` in a pseudo-terminal (pexpect): from the start to the
  moment the prompt's text arrives (``(Pdb) ``, ``(Pdb++) ``, ``(llmpdb) ``), the stop's header and its
  colours included; then ``q``. This is what a person waits for (needs pexpect);
- ``first prompt, -c q``: ``-c q examples/infer.py`` through pipes: start, import the debugger, compile the
  script, stop at its first line and quit there. pdb and pdb++ run ``-c`` commands before they print the
  stop's header, so they skip its source highlighting here, which llmpdb does not;
- ``import torch, transformers``: a script that imports both, with ``b`` on a later line of the script set at
  the first prompt, then ``c`` from a pipe (only when torch imports).

stdlib pdb runs as ``PDBPP_HIJACK_PDB=0 python -m pdb``, pdb++ as ``python -m pdb`` with pdb++'s hijack
(skipped when pdb++ is missing). Byte-code caches are allowed (a person's Python writes them): a warm-up
run of each command comes first. The machine may be shared: read single runs with care. Not a timed test.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "infer.py")

IMPORTS = """\
import torch
import transformers
from transformers import LlamaConfig
x = 1
y = 2  # the breakpoint line
print("done", x + y)
"""


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra)
    return env


def debuggers() -> list[tuple[str, list[str], dict]]:
    found = [("stdlib pdb", [sys.executable, "-m", "pdb"], _env(PDBPP_HIJACK_PDB="0"))]
    if importlib.util.find_spec("pdbpp") is not None:
        # installed is not enough: pdb++ 0.12.1 fails to import on 3.13.0
        tried = subprocess.run([sys.executable, "-c", "import pdbpp"], env=_env(PDBPP_HIJACK_PDB="1"),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        if tried.returncode == 0:
            found.append(("pdb++", [sys.executable, "-m", "pdb"], _env(PDBPP_HIJACK_PDB="1")))
        else:
            last = (tried.stdout.decode(errors="replace").strip().splitlines() or ["?"])[-1]
            print(f"(pdb++ left out: it does not import here: {last})")
    found.append(("llmpdb", [sys.executable, "-m", "llmpdb"], _env()))
    return found


def timed(command: list[str], env: dict, typed: bytes) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, env=env, input=typed, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=300)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{command} exited {done.returncode}:\n{done.stdout.decode(errors='replace')[-2000:]}")
    return elapsed


PROMPTS = {"stdlib pdb": r"\(Pdb\) ", "pdb++": r"\(Pdb\+\+\) ", "llmpdb": r"\(llmpdb\) "}


def timed_in_terminal(name: str, command: list[str], env: dict) -> float:
    """Seconds from the start of ``command`` in a pseudo-terminal to its first prompt; then ``q``."""
    import pexpect

    start = time.perf_counter()
    child = pexpect.spawn(command[0], command[1:], env={**env, "TERM": "xterm-256color"}, dimensions=(40, 120),
                          timeout=60)
    try:
        child.expect(PROMPTS[name])
        elapsed = time.perf_counter() - start
        child.sendline("q")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", choices=("prompt", "imports"), default=None)
    args = parser.parse_args(argv)
    folder = tempfile.mkdtemp(prefix="llmpdb-startup-")
    script = os.path.join(folder, "imports.py")
    with open(script, "w") as handle:
        handle.write(IMPORTS)
    line = IMPORTS.splitlines().index("y = 2  # the breakpoint line") + 1
    rows = []
    if args.only in (None, "prompt") and importlib.util.find_spec("pexpect") is not None:
        rows.append(("first prompt in a terminal", [EXAMPLE], None))
    if args.only in (None, "prompt"):
        rows.append(("first prompt, -c q", ["-c", "q", EXAMPLE], b""))
    have_torch = all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers"))
    if args.only in (None, "imports") and have_torch:
        # ``c`` comes from a pipe: after it runs out pdb quits at the breakpoint, llmpdb goes on to the end
        rows.append(("import torch, transformers", ["-c", f"b {line}", script], b"c\n"))
    tools = debuggers()
    print(f"Python {sys.version.split()[0]}, {args.rounds} rounds, interleaved; wall seconds (median) and "
          "ratio to stdlib pdb of the same round")
    for row, tail, typed in rows:
        def measure(name, command, env):
            if typed is None:
                return timed_in_terminal(name, command + tail, env)
            return timed(command + tail, env, typed)

        for name, command, env in tools:
            measure(name, command, env)  # warm-up: byte-code caches, the file system
        times = {name: [] for name, _, _ in tools}
        for _ in range(args.rounds):
            for name, command, env in tools:
                times[name].append(measure(name, command, env))
        base = times["stdlib pdb"]
        cells = []
        for name, _, _ in tools:
            ratio = statistics.median(t / b for t, b in zip(times[name], base))
            cells.append(f"{name} {statistics.median(times[name]):.3f} s ({ratio:.2f})")
        print(f"| {row} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
