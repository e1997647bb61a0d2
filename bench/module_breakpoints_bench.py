"""Overhead of armed module breakpoints on a tiny Llama ``generate()``, against no breakpoints, same run.

Usage::

    python bench/module_breakpoints_bench.py [--rounds 7] [--tokens 16]

CPU time (``time.process_time``). Variants, run in interleaved rounds (A B C D A B C D ...) so drift hits them all alike; the median time
of each is divided by the median of "none":

- none:             no module breakpoint
- armed elsewhere:  one breakpoint armed on a module of another model (nothing in this model matches;
                    only torch's module-registration hook is installed)
- cond false:       ``break-module model.layers.1.self_attn if hidden_states.shape[1] < 0`` (matches on
                    every step; the condition is evaluated in the forward frame and never holds)
- pending:          a pending breakpoint (``vision_tower.blocks.0``: matches no model yet), so llmpdb's
                    root watch stays installed. On 3.12+ it is a hook on each module not yet looked at
                    (the model loses its hooks at its first call; ``other``, never run, keeps them); on
                    3.11 a global forward pre-hook, where each later module call costs one dict lookup
- pending, seen:    the same, with the model's one look made before the clock starts (an untimed
                    forward): what each module call costs while a breakpoint stays pending
- global hook:      for comparison, a no-op ``register_module_forward_pre_hook`` (the floor of any
                    global hook: torch leaves its hook-free fast path for every module call)

With nothing pending ("none", "armed elsewhere", "cond false") no global hook is installed at all.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.append(os.path.join(ROOT, "tests"))  # appended: tests/inspect/ must not shadow the stdlib inspect

import torch  # noqa: E402

from llmpdb.forward.breakpoints import ModuleBreakpointEngine  # noqa: E402
from tiny_models import tiny_llama  # noqa: E402


def _never_stop(frame, header):
    raise AssertionError(f"the benchmark must not stop: {header}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tokens", type=int, default=16)
    args = parser.parse_args(argv)

    torch.set_num_threads(1)
    model = tiny_llama()
    other = tiny_llama()
    ids = torch.tensor([[1, 2, 3, 4, 5, 6, 7]])

    def run() -> float:
        start = time.process_time()
        with torch.no_grad():
            model.generate(ids, max_new_tokens=args.tokens, min_new_tokens=args.tokens, do_sample=False)
        return time.process_time() - start

    def variant_none():
        return run()

    def variant_elsewhere():
        engine = ModuleBreakpointEngine(_never_stop)
        engine.add("model.layers.1.self_attn", [other])
        try:
            return run()
        finally:
            engine.clear()

    def variant_cond_false():
        engine = ModuleBreakpointEngine(_never_stop)
        bp = engine.add("model.layers.1.self_attn", [model], condition="hidden_states.shape[1] < 0")
        try:
            elapsed = run()
        finally:
            engine.clear()
        assert bp.calls == args.tokens and bp.stops == 0, (bp.calls, bp.stops)
        return elapsed

    def variant_pending():
        engine = ModuleBreakpointEngine(_never_stop)
        bp = engine.add("vision_tower.blocks.0", [], pending=True)
        hooks = torch.nn.modules.module._global_forward_pre_hooks
        try:
            assert engine._roots.installed, "the root watch is installed while a breakpoint is pending"
            assert len(hooks) == (engine._roots.mode == "global"), engine._roots.mode
            elapsed = run()
        finally:
            engine.clear()
        assert bp.pending and not hooks and not engine._roots.installed, "the watch went with the breakpoint"
        return elapsed

    def variant_pending_seen():
        engine = ModuleBreakpointEngine(_never_stop)
        bp = engine.add("vision_tower.blocks.0", [], pending=True)
        with torch.no_grad():
            model(ids)  # untimed: the one look at a model not seen before (a walk of its names)
        try:
            elapsed = run()
        finally:
            engine.clear()
        assert bp.pending
        return elapsed

    def variant_global_hook():
        handle = torch.nn.modules.module.register_module_forward_pre_hook(lambda module, inputs: None)
        try:
            return run()
        finally:
            handle.remove()

    variants = {"none": variant_none, "armed elsewhere": variant_elsewhere, "cond false": variant_cond_false,
                "pending": variant_pending, "pending, seen": variant_pending_seen, "global hook": variant_global_hook}
    for func in variants.values():  # warm up every path once
        func()
    times = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, func in variants.items():
            times[name].append(func())
    base = statistics.median(times["none"])
    mode = "a hook on each module not yet seen" if hasattr(sys, "monitoring") else "a global pre-hook"
    print(f"tiny Llama generate(), {args.tokens} new tokens, {args.rounds} interleaved rounds, torch "
          f"{torch.__version__}, Python {sys.version.split()[0]}; pending: {mode}")
    print(f"{'variant':<16} {'median ms':>10} {'ratio':>7}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:<16} {median * 1000:>10.2f} {median / base:>7.3f}")
    assert sys.gettrace() is None, "a trace function was left installed"


if __name__ == "__main__":
    main()
