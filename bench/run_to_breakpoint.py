"""Run-to-breakpoint cost, as ``python -m llmpdb script.py`` runs a script: plain Python vs stdlib pdb vs
pdb++ vs llmpdb's fast breakpoint engine, measured side by side in one run.

Usage::

    python bench/run_to_breakpoint.py                    # tiny Llama generate() when torch imports
    python bench/run_to_breakpoint.py --workload pure    # torch-free, call-heavy Python (3.12/3.13)
    python bench/run_to_breakpoint.py --rounds 5 --iters 10

A small script (written to a temporary folder) calls ``main(iters)``, which calls ``forward(iters)``: the
forward of a tiny ``nn.Module`` whose loop runs ``iters`` Llama ``generate()`` calls (``pure``: a plain
function whose loop runs call-heavy Python). Each debugger runs the script through pdb's own
``_run(_ScriptTarget)`` (so llmpdb compiles it as ``python -m llmpdb`` does), stopped at its first line and
fed the row's commands; every row ends at a breakpoint in ``finish()``. Rows (the issue's table):

- ``modeling only``: a breakpoint in ``modeling_llama.py`` that is never reached (``repeat_kv``'s early
  return; ``pure``: a guard in ``hot()``), set before the run;
- ``+ running script``: and one on a never-reached line of the running script's module code;
- ``running script only``: that one alone;
- ``+ function on the stack``: stopped in ``main()``, a breakpoint further down ``main()`` as well;
- ``return out of a forward``: stopped at the forward's first line, ``r``;
- ``until past a loop``: stopped at the last line of the forward's loop, ``until``;
- ``next over the call``: stopped at ``main``'s ``out = forward(iters)``, ``n``;
- ``false condition in attention``: ``b modeling_llama.py:<LlamaAttention.forward's q_proj line>,
  hidden_states.shape[0] < 0`` (``pure``: a reached line of ``hot()``, ``k < 0``).

Variants run interleaved, ``--rounds`` times; a row is the median over rounds of (time / plain time of the
same round). "arming aside" subtracts the seconds llmpdb's engine reports for arming and releasing
(``arm_seconds``: the 3.11 ``gc`` pass, paid when breakpoints change, not per call). "floor" is plain
Python under a global trace function that returns ``None`` at once: on 3.11, the least any delivery by
tracing (a frame already running, ``next``/``until``/``return``) can cost. The machine this runs on may be
shared: read single runs with care. Not a timed test.
"""

from __future__ import annotations

import argparse
import bdb
import io
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from llmpdb.base import stdlib_pdb  # noqa: E402
from llmpdb.breakpoints import FastBreakpointsMixin, engine_kind  # noqa: E402

STATE = "llmpdb_bench_state"  # the module through which the script reaches the workload


class LlmpdbEnginePdb(FastBreakpointsMixin, stdlib_pdb.Pdb):
    """llmpdb's engine on the standard pdb base."""


def _pdbpp_class():
    try:
        import pdbpp
    except Exception as exc:  # pdb++ does not import on 3.13
        print(f"(pdb++ unavailable: {type(exc).__name__}: {exc})")
        return None
    return pdbpp.Pdb


SCRIPT = '''\
import sys
state = sys.modules["{state}"]


def main(iters):
    out = None  # MAIN-FIRST
    out = state.forward(iters)  # MAIN-CALL
    if out is None:
        print("never")  # MAIN-NEVER
    return out


never = None
result = main(state.iters)
if never is not None:
    print("never")  # SCRIPT-NEVER
state.finish(result)
'''


# ---- workloads --------------------------------------------------------------------------------------------
def hot(x: int, k: int) -> int:
    if k < 0:
        return -x  # BENCH-NEVER (the pure workload's never-reached breakpoint line)
    return x * k + 1  # BENCH-HOT (the pure workload's false-condition line)


def finish(result):
    return result  # BENCH-END (the end-of-workload breakpoint line)


def pure_forward(iters: int) -> int:
    total = 0  # FORWARD-FIRST
    for _ in range(iters):
        for i in range(60_000):
            total += hot(i, 3) % 7
        total += sum(map(abs, range(20_000)))  # FORWARD-LOOP-END
    return total


class Llama:
    """A tiny random Llama (hidden 64, 2 layers, 4 heads / 2 kv heads) and a module whose forward loops."""

    def __init__(self):
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.set_num_threads(1)
        torch.manual_seed(0)
        config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                             attn_implementation="eager")
        model = LlamaForCausalLM(config).eval()
        ids = torch.randint(0, 256, (1, 8))

        class Generate(torch.nn.Module):
            def forward(self, iters):
                out = None  # FORWARD-FIRST
                with torch.no_grad():
                    for _ in range(iters):
                        out = model.generate(ids, max_new_tokens=16, do_sample=False, pad_token_id=0)
                        out = out[:, -1:]  # FORWARD-LOOP-END
                return out

        self.forward = Generate()
        import transformers.models.llama.modeling_llama as modeling

        self.modeling = modeling.__file__
        self.never = _line_after(self.modeling, "def repeat_kv", "return hidden_states")
        self.attention = _line_after(self.modeling, "class LlamaAttention",
                                     "query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)")


def _line_after(path: str, anchor: str, text: str) -> int:
    with open(path) as handle:
        lines = handle.read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(anchor))
    return next(i for i in range(start, len(lines)) if lines[i].strip() == text) + 1


def _marker(path: str, marker: str) -> int:
    with open(path) as handle:
        return next(i for i, line in enumerate(handle.read().splitlines(), 1) if f"# {marker}" in line)


# ---- rows ------------------------------------------------------------------------------------------------
def rows(workload: str, script: str, llama) -> list[tuple[str, list[str]]]:
    """(row name, commands typed at the script's first stop) for every row of the table."""
    here = os.path.abspath(__file__)
    end = f"b {here}:{_marker(here, 'BENCH-END')}"
    if workload == "llama":
        never = f"b {llama.modeling}:{llama.never}"
        attention = f"b {llama.modeling}:{llama.attention}, hidden_states.shape[0] < 0"
    else:
        never = f"b {here}:{_marker(here, 'BENCH-NEVER')}"
        attention = f"b {here}:{_marker(here, 'BENCH-HOT')}, k < 0"
    script_never = f"b {_marker(script, 'SCRIPT-NEVER')}"
    return [
        ("modeling only", [never, end, "c", "c"]),
        ("+ running script", [never, script_never, end, "c", "c"]),
        ("running script only", [script_never, end, "c", "c"]),
        ("+ function on the stack", [f"tbreak {_marker(script, 'MAIN-FIRST')}", "c", never, script_never,
                                     f"b {_marker(script, 'MAIN-NEVER')}", end, "c", "c"]),
        ("return out of a forward", [f"tbreak {here}:{_first_forward_line(workload)}", "c", end, "r", "c", "c"]),
        ("until past a loop", [f"tbreak {here}:{_loop_end_line(workload)}", "c", end, "until", "c", "c"]),
        ("next over the call", [f"tbreak {_marker(script, 'MAIN-CALL')}", "c", end, "n", "c", "c"]),
        ("false condition in attention", [attention, end, "c", "c"]),
    ]


def _first_forward_line(workload: str) -> int:
    return _nth_marker("FORWARD-FIRST", 1 if workload == "pure" else 2)


def _loop_end_line(workload: str) -> int:
    return _nth_marker("FORWARD-LOOP-END", 1 if workload == "pure" else 2)


def _nth_marker(marker: str, nth: int) -> int:
    with open(os.path.abspath(__file__)) as handle:
        found = [i for i, line in enumerate(handle.read().splitlines(), 1) if f"# {marker}" in line]
    return found[nth - 1]


# ---- running ---------------------------------------------------------------------------------------------
def _clear_breakpoints() -> None:
    bdb.Breakpoint.next = 1
    bdb.Breakpoint.bplist = {}
    bdb.Breakpoint.bpbynumber = [None]


def run_plain(script: str) -> float:
    with open(script, "rb") as handle:
        code = compile(handle.read(), script, "exec")
    start = time.perf_counter()
    exec(code, {"__name__": "__main__", "__file__": script})
    return time.perf_counter() - start


def run_floor(script: str) -> float:
    """Seconds to run ``script`` plainly under a global trace function that returns None at once."""
    sys.settrace(_no_trace)
    try:
        return run_plain(script)
    finally:
        sys.settrace(None)


def _no_trace(frame, event, arg):
    return None


def run_under(cls, script: str, commands: list[str], arming: list[float]) -> float:
    """Seconds to run ``script`` under debugger ``cls``, fed ``commands`` at its first stop; the seconds
    llmpdb's engine spent arming and releasing breakpoints are appended to ``arming``."""
    _clear_breakpoints()
    out = io.StringIO()
    debugger = cls(stdin=io.StringIO("\n".join(commands) + "\n"), stdout=out, nosigint=True, readrc=False)
    saved_main = dict(sys.modules["__main__"].__dict__)
    start = time.perf_counter()
    try:
        debugger._run(stdlib_pdb._ScriptTarget(script))
    finally:
        elapsed = time.perf_counter() - start
        sys.settrace(None)
        sys.modules["__main__"].__dict__.clear()
        sys.modules["__main__"].__dict__.update(saved_main)
        _clear_breakpoints()
    engine = debugger.__dict__.get("_fb", {}).get("engine")
    arming.append(getattr(engine, "arm_seconds", 0.0))
    if "BENCH-END" not in out.getvalue():
        raise SystemExit(f"{cls.__name__} never stopped at the end of the workload ({commands}):\n{out.getvalue()}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=("llama", "pure"), default=None)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--rows", default="", help="only the rows whose name contains one of these "
                        "comma-separated words (``--rows return,next``)")
    args = parser.parse_args(argv)
    workload = args.workload
    if workload is None:
        import importlib.util

        have = all(importlib.util.find_spec(name) is not None for name in ("torch", "transformers"))
        workload = "llama" if have else "pure"
    llama = Llama() if workload == "llama" else None
    state = type(sys)(STATE)
    state.forward, state.finish, state.iters = (llama.forward if llama else pure_forward), finish, args.iters
    sys.modules[STATE] = state
    folder = tempfile.mkdtemp(prefix="llmpdb-bench-")
    script = os.path.join(folder, "script.py")
    with open(script, "w") as handle:
        handle.write(SCRIPT.format(state=STATE))
    debuggers = [("stdlib pdb", stdlib_pdb.Pdb), ("pdb++", _pdbpp_class()), ("llmpdb", LlmpdbEnginePdb)]
    debuggers = [(name, cls) for name, cls in debuggers if cls is not None]
    table = rows(workload, script, llama)
    wanted = [word.strip() for word in args.rows.split(",") if word.strip()]
    if wanted:
        table = [(row, commands) for row, commands in table if any(word in row for word in wanted)]
    print(f"Python {sys.version.split()[0]}, workload {workload}, engine {engine_kind()}, "
          f"{args.rounds} rounds x {args.iters} iterations, interleaved; ratios to plain Python, same round")
    run_plain(script)  # warm up caches and lazy imports
    plain: list[float] = []
    floor: list[float] = []
    times = {(row, name): [] for row, _ in table for name, _ in debuggers}
    arming = {(row, name): [] for row, _ in table for name, _ in debuggers}
    for _ in range(args.rounds):
        plain.append(run_plain(script))
        floor.append(run_floor(script))
        for row, commands in table:
            for name, cls in debuggers:
                times[row, name].append(run_under(cls, script, commands, arming[row, name]))
        plain.append(run_plain(script))
    base = [statistics.mean(plain[i:i + 2]) for i in range(0, len(plain), 2)]
    print(f"plain: median {statistics.median(plain):.3f} s; floor (a global trace function returning None): "
          f"{statistics.median(f / b for f, b in zip(floor, base)):.2f}")
    print("| setup | " + " | ".join(name for name, _ in debuggers) + " | llmpdb, arming aside | llmpdb arming s |")
    print("| --- | " + " | ".join("---" for _ in debuggers) + " | --- | --- |")
    for row, _ in table:
        ratios = [statistics.median(t / b for t, b in zip(times[row, name], base)) for name, _ in debuggers]
        ours = times[row, "llmpdb"], arming[row, "llmpdb"]
        steady = statistics.median((t - a) / b for t, a, b in zip(*ours, base))
        print(f"| {row} | " + " | ".join(f"{r:.2f}" for r in ratios)
              + f" | {steady:.2f} | {statistics.median(ours[1]):.2f} |")
    return 0


if __name__ == "__main__":
    # pdb's _run clears __main__: run from an imported copy of this module, whose globals survive
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import run_to_breakpoint

    raise SystemExit(run_to_breakpoint.main())
