"""What an armed ``catch`` costs while nothing matching is raised: plain Python vs the same run with a catch set.

Usage::

    python bench/catch_bench.py                    # tiny Llama generate() when torch imports, and pure Python
    python bench/catch_bench.py --workload pure    # torch-free, call-heavy Python (3.12/3.13)
    python bench/catch_bench.py --rounds 9 --iters 5

Each round runs the workload plain, then with ``catch ShapeMismatchError`` armed (a class never raised),
then with ``catch *Error if False`` armed (a pattern that matches the ``AttributeError``s raised and handled
inside transformers and the ``KeyError``s of the pure workload, so every such raise runs the check and the
condition). The catch is armed through ``llmpdb.breakpoints.catching.CATCHES`` exactly as the ``catch`` command arms
it. Each row prints the median over rounds of (time / plain time of the same round). On 3.12+ the
backend is ``sys.monitoring`` (RAISE events only); on 3.11 a trace function sees every call.
Not a timed test: numbers depend on the machine; see docs/design.md for measured ones.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from llmpdb.breakpoints.catching import CATCHES, backend_name  # noqa: E402


def hot(x: int, k: int) -> int:
    return x * k + 1


def pure(iters: int) -> int:
    """Call-heavy Python with a handled KeyError every 100 calls."""
    total, table = 0, {}
    for i in range(iters * 20_000):
        total += hot(i, 3)
        if i % 100 == 0:
            try:
                total += table[i]
            except KeyError:
                total += 1
    return total


def llama_workload():
    sys.path.append(os.path.join(ROOT, "tests"))
    import torch
    from tiny_models import tiny_llama

    torch.set_num_threads(1)
    model = tiny_llama(attn_implementation="eager")
    ids = torch.tensor([[1, 2, 3, 4, 5]])

    def run(iters: int):
        with torch.no_grad():
            for _ in range(iters):
                model.generate(ids, max_new_tokens=16, do_sample=False, pad_token_id=0)

    return run


def _timed(func, iters: int) -> float:
    start = time.perf_counter()
    func(iters)
    return time.perf_counter() - start


def _never_stop(frame, exc, tb, catch, note):
    raise AssertionError(f"the benchmark's catch stopped at {exc!r}")


def measure(func, iters: int, rounds: int) -> dict[str, float]:
    CATCHES.stopper = _never_stop
    variants = {"catch ShapeMismatchError": ("ShapeMismatchError", None), "catch *Error if False": ("*Error", "False")}
    ratios: dict[str, list[float]] = {name: [] for name in variants}
    plain_times = []
    func(1)  # warm up
    for _ in range(rounds):
        plain = _timed(func, iters)
        plain_times.append(plain)
        for name, (pattern, condition) in variants.items():
            CATCHES.add(pattern, condition)
            try:
                ratios[name].append(_timed(func, iters) / plain)
            finally:
                CATCHES.remove()
    return {"plain seconds": statistics.median(plain_times),
            **{name: statistics.median(values) for name, values in ratios.items()}}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=["llama", "pure", "both"], default="both")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"Python {sys.version.split()[0]}, catch backend: {backend_name()}; ratios to plain, median of "
          f"{args.rounds} rounds")
    workloads = []
    if args.workload in ("pure", "both"):
        workloads.append(("pure", pure))
    if args.workload in ("llama", "both"):
        try:
            workloads.append(("llama generate", llama_workload()))
        except ImportError as exc:
            print(f"(llama workload unavailable: {exc})")
    for label, func in workloads:
        result = measure(func, args.iters, args.rounds)
        cells = "  ".join(f"{name} {value:.2f}x" for name, value in result.items() if name != "plain seconds")
        print(f"{label:<15} plain {result['plain seconds']:.3f}s  {cells}")


if __name__ == "__main__":
    main()
