"""Run-to-breakpoint cost: plain Python vs stdlib pdb vs pdb++ vs llmpdb's fast breakpoint engine.

Usage::

    python bench/run_to_breakpoint.py                    # tiny Llama generate() when torch imports
    python bench/run_to_breakpoint.py --workload pure    # torch-free, call-heavy Python (3.12/3.13)
    python bench/run_to_breakpoint.py --rounds 9 --iters 3

Each debugger runs the workload with two breakpoints: one on a line of the hot code that is never reached
(``repeat_kv``'s ``n_rep == 1`` return in transformers' ``modeling_llama.py`` for the Llama workload, a
guard in ``hot()`` of this file for the pure one) and one in ``finish()``, called at the workload's end.
The debugger starts stopped at the workload's first line and is told ``c``, then ``c`` again at the end
breakpoint. The
``next`` rows stop at the first line and step over the whole workload with ``n``. Variants run interleaved,
``--rounds`` times; each row prints the median over rounds of (time / plain time of the same round).
Not a timed test: numbers depend on the machine; see docs/design.md for measured ones.
"""

from __future__ import annotations

import argparse
import bdb
import gc
import io
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from llmpdb.base import stdlib_pdb  # noqa: E402
from llmpdb.breakpoints import FastBreakpointsMixin, engine_kind  # noqa: E402


class LlmpdbEnginePdb(FastBreakpointsMixin, stdlib_pdb.Pdb):
    """llmpdb's engine on the standard pdb base."""


def _pdbpp_class():
    try:
        import pdbpp
    except Exception as exc:  # pdb++ does not import on 3.13
        print(f"(pdb++ unavailable: {type(exc).__name__}: {exc})")
        return None
    return pdbpp.Pdb


# ---- workloads --------------------------------------------------------------------------------------------
def hot(x: int, k: int) -> int:
    if k < 0:
        return -x  # BENCH-NEVER (the pure workload's never-reached breakpoint line)
    return x * k + 1


def finish(result):
    return result  # BENCH-END (the end-of-workload breakpoint line)


def pure_workload(iters: int) -> int:
    total = 0
    for _ in range(iters):
        for i in range(60_000):
            total += hot(i, 3) % 7
        total += sum(map(abs, range(20_000)))
    return finish(total)


def _empty_workload(iters: int):
    return finish(iters)


def pure_next_workload(iters: int) -> int:
    total = pure_workload(iters)
    return total  # BENCH-NEXT-END-PURE


class Llama:
    """A tiny random Llama (hidden 64, 2 layers, 4 heads / 2 kv heads) and its generate() call."""

    def __init__(self):
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.set_num_threads(1)
        torch.manual_seed(0)
        config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                             attn_implementation="eager")
        self.torch = torch
        self.model = LlamaForCausalLM(config).eval()
        self.ids = torch.randint(0, 256, (1, 8))
        import transformers.models.llama.modeling_llama as modeling

        self.never = (modeling.__file__, _line_after(modeling.__file__, "def repeat_kv", "return hidden_states"))

    def workload(self, iters: int):
        with self.torch.no_grad():
            for _ in range(iters):
                out = self.model.generate(self.ids, max_new_tokens=16, do_sample=False, pad_token_id=0)
        return finish(out)

    def next_workload(self, iters: int):
        out = self.workload(iters)
        return out  # BENCH-NEXT-END-LLAMA


def _line_after(path: str, anchor: str, text: str) -> int:
    with open(path) as handle:
        lines = handle.read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(anchor))
    return next(i for i in range(start, len(lines)) if lines[i].strip() == text) + 1


def _marker_line(marker: str) -> int:
    with open(__file__) as handle:
        return next(i for i, line in enumerate(handle.read().splitlines(), 1) if f"# {marker}" in line)


ARMING: list[float] = []  # seconds each llmpdb session spent arming/releasing breakpoints


# ---- running ---------------------------------------------------------------------------------------------
def _clear_breakpoints() -> None:
    bdb.Breakpoint.next = 1
    bdb.Breakpoint.bplist = {}
    bdb.Breakpoint.bpbynumber = [None]


def run_under(cls, func, iters: int, breaks: list[tuple[str, int]], commands: list[str]) -> float:
    """Seconds to run ``func(iters)`` under debugger ``cls`` (None: plain) fed with ``commands``."""
    if cls is None:
        start = time.perf_counter()
        func(iters)
        return time.perf_counter() - start
    _clear_breakpoints()
    out = io.StringIO()
    debugger = cls(stdin=io.StringIO("\n".join(commands) + "\n"), stdout=out, nosigint=True, readrc=False)
    for filename, line in breaks:
        error = debugger.set_break(filename, line)
        if error:
            raise SystemExit(f"cannot set breakpoint {filename}:{line}: {error}")
    start = time.perf_counter()
    debugger.runcall(func, iters)
    elapsed = time.perf_counter() - start
    sys.settrace(None)
    engine = getattr(debugger, "_fb", {}).get("engine")
    if engine is not None:
        ARMING.append(engine.arm_seconds)
    text = out.getvalue()
    expected = "BENCH-NEXT-END" if "n" in commands else "BENCH-END"
    if func is _empty_workload:
        expected = "BENCH-END"
    if expected not in text:
        raise SystemExit(f"{cls.__name__} never stopped at the end of the workload:\n{text}")
    _clear_breakpoints()
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=("llama", "pure"), default=None)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--iters", type=int, default=10)
    args = parser.parse_args(argv)
    workload = args.workload
    if workload is None:
        import importlib.util

        have = all(importlib.util.find_spec(name) is not None for name in ("torch", "transformers"))
        workload = "llama" if have else "pure"
    if workload == "llama":
        llama = Llama()
        func, next_func, never = llama.workload, llama.next_workload, llama.never
    else:
        func, next_func, never = pure_workload, pure_next_workload, (__file__, _marker_line("BENCH-NEVER"))
    end = (__file__, _marker_line("BENCH-END"))
    debuggers = [("stdlib pdb", stdlib_pdb.Pdb), ("pdb++", _pdbpp_class()), ("llmpdb engine", LlmpdbEnginePdb)]
    debuggers = [(name, cls) for name, cls in debuggers if cls is not None]
    variants = [("plain", None, func, [], [])]
    for name, cls in debuggers:
        variants.append((f"{name}: continue to breakpoint", cls, func, [never, end], ["c", "c"]))
    variants.append(("plain (next workload)", None, next_func, [], []))
    for name, cls in debuggers:
        variants.append((f"{name}: next over the workload", cls, next_func, [never], ["n", "c"]))
    print(f"Python {sys.version.split()[0]}, workload {workload}, engine {engine_kind()}, "
          f"{args.rounds} rounds x {args.iters} iterations")
    print(f"never-reached breakpoint: {never[0]}:{never[1]}")
    run_under(None, func, 1, [], [])  # warm up caches and lazy imports
    times: dict[str, list[float]] = {name: [] for name, *_ in variants}
    armed: dict[str, list[float]] = {name: [] for name, *_ in variants}
    for _ in range(args.rounds):
        for name, cls, target, breaks, commands in variants:
            ARMING.clear()
            times[name].append(run_under(cls, target, args.iters, breaks, commands))
            armed[name].append(sum(ARMING))
    fixed = [run_under(LlmpdbEnginePdb, _empty_workload, 0, [never, end], ["c", "c"]) for _ in range(3)]
    print(f"llmpdb engine fixed cost per session (arm + release, empty workload): "
          f"{statistics.median(fixed) * 1000:.0f} ms; {len(gc.get_objects())} objects tracked by gc")
    plain = times["plain"]
    plain_next = times["plain (next workload)"]
    print(f"{'variant':44} {'median s':>9} {'x plain':>8} {'arming s':>9} {'x plain, arming aside':>22}")
    for name, *_ in variants:
        base = plain_next if "next" in name else plain
        ratio = statistics.median(t / b for t, b in zip(times[name], base))
        line = f"{name:44} {statistics.median(times[name]):9.3f} {ratio:8.2f}"
        if any(armed[name]):
            steady = statistics.median((t - a) / b for t, a, b in zip(times[name], armed[name], base))
            line += f" {statistics.median(armed[name]):9.3f} {steady:22.2f}"
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
