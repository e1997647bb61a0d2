"""Overhead of ``nan-break`` (and of ``trace``'s hooks) on a tiny Llama, against plain runs and
``torch.autograd.detect_anomaly``, measured in one run.

Usage::

    python bench/nan_break_bench.py [--rounds 7] [--iters 10]

Two workloads, each timed in interleaved rounds (A B C A B C ...) so drift hits every variant alike; the
median of each is divided by the median of its plain variant:

- forward (no_grad): plain / ``nan-break`` (one ``isfinite(t).all()`` per output tensor of every module
  call) / ``detect_anomaly`` / ``trace`` (shape-recording hooks on every module)
- forward + backward: plain / ``nan-break --grad`` (outputs checked, and each output's gradient checked by
  a tensor hook) / ``detect_anomaly`` (which checks gradients in backward and records forward stacks)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.append(os.path.join(ROOT, "tests"))  # appended: tests/inspect/ must not shadow the stdlib inspect

import torch  # noqa: E402

from llmpdb.forward.nan_break import NanBreak  # noqa: E402
from llmpdb.forward.trace import ForwardTrace, traced_modules  # noqa: E402
from llmpdb.inspect.modules import model_names  # noqa: E402
from tiny_models import tiny_llama  # noqa: E402


def _never_stop(frame, header):
    raise AssertionError(f"the benchmark must not stop: {header}")


def _names(root):
    return {k: (v[0] if v else "") for k, v in model_names(root).names.items()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--iters", type=int, default=10)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    model = tiny_llama()
    ids = torch.randint(3, 200, (2, 32))

    def forward() -> float:
        start = time.perf_counter()
        with torch.no_grad():
            for _ in range(args.iters):
                model(ids)
        return time.perf_counter() - start

    def forward_backward() -> float:
        start = time.perf_counter()
        for _ in range(args.iters):
            model(ids).logits.sum().backward()
        return time.perf_counter() - start

    def with_nan_break(run, grad: bool):
        def variant():
            engine = NanBreak(_never_stop)
            engine.arm(roots=[model])
            if grad:
                engine.arm(grad=True, roots=[model])
            try:
                return run()
            finally:
                engine.disarm()
        return variant

    def with_anomaly(run):
        def variant():
            with torch.autograd.detect_anomaly(check_nan=True):
                return run()
        return variant

    def with_trace(run):
        def variant():
            total = 0.0
            for _ in range(args.iters):  # one trace per forward pass, as a user would run it
                trace = ForwardTrace(traced_modules([(model, "")], _names), [model])
                start = time.perf_counter()
                with trace.recording(), torch.no_grad():
                    model(ids)
                total += time.perf_counter() - start
            return total
        return variant

    workloads = {
        "forward (no_grad)": {"plain": forward, "nan-break": with_nan_break(forward, False),
                              "detect_anomaly": with_anomaly(forward), "trace": with_trace(forward)},
        "forward + backward": {"plain": forward_backward, "nan-break --grad": with_nan_break(forward_backward, True),
                               "detect_anomaly": with_anomaly(forward_backward)},
    }
    print(f"tiny Llama (2 layers, hidden 64), batch 2 × 32 tokens, {args.iters} passes per sample, "
          f"{args.rounds} interleaved rounds, torch {torch.__version__}, Python {sys.version.split()[0]}")
    for title, variants in workloads.items():
        for func in variants.values():  # warm up every path once
            func()
        times = {name: [] for name in variants}
        for _ in range(args.rounds):
            for name, func in variants.items():
                times[name].append(func())
        base = statistics.median(times["plain"])
        print(f"\n{title}")
        print(f"{'variant':<18} {'median ms':>10} {'ratio':>7}")
        for name, values in times.items():
            median = statistics.median(values)
            print(f"{name:<18} {median * 1000:>10.2f} {median / base:>7.2f}")
    assert not torch.nn.modules.module._global_forward_hooks, "a global hook was left installed"


if __name__ == "__main__":
    main()
