"""Issue #26's table in one run: each armed feature against plain, stdlib pdb, pdb++ and detect_anomaly.

Usage::

    python bench/armed_bench.py                 # every row (a few minutes on 2 cores)
    python bench/armed_bench.py --rounds 9 --only nan,snap
    python bench/armed_bench.py --only bm,step,prompt --quick

Rows, on the Python that runs this script:

- ``nan-break`` (forward, no_grad) and ``nan-break --grad`` (forward + backward), each checking every
  module and ``--blocks`` (the model's blocks only), tiny Llama: CPU time (``time.process_time``) of
  plain / armed / ``torch.autograd.detect_anomaly(check_nan=True)``, in interleaved rounds, in this
  process; ratio = median(variant) / median(plain); the note gives the ratio of no-op hooks where the
  checks hook (a global forward hook; one on each block), the floor of any check made there, and of the
  same hooks doing only the reads (``t.sum().item()`` per floating output tensor, no walk, no gradient
  hook), the floor of any check that reads every value where it hooks;
- the four rows again on a wider Llama (hidden 512, 4 layers, batch 2 × 128): the checks' fixed cost per
  call against matmuls that are not tiny;
- host reads per forward (``.item()``, a sync each on a GPU), counted with the torch profiler: every
  module, blocks read at once (the CPU), blocks read once per forward (a GPU's path, ``defer_on_cpu``);
- ``statediff snap`` on a 64-layer tiny Llama: CPU ms of ``take_snapshot`` + ``render_snapshot`` (what
  the command computes and prints), median over rounds; pdb and pdb++ have no such command;
- ``bm … if COND`` false and ``bm`` pending over ``generate()``: ``bench/module_breakpoints_bench.py``;
- ``return`` out of a forward and ``next`` over ``generate()``: ``bench/run_to_breakpoint.py`` (its
  ratios to plain Python under stdlib pdb, pdb++ and llmpdb);
- first prompt without a terminal (``-c q examples/infer.py``): ``bench/startup_bench.py --only prompt``;
- first prompt in a terminal (``python -m llmpdb examples/infer.py`` in a pty, through pexpect, until the
  prompt is drawn; prompt_toolkit's for llmpdb): wall time against stdlib pdb and pdb++, interleaved.

The last three run as subprocesses of this one (their own interleaving; their raw tables are printed
too), one after the other: nothing else of this script runs meanwhile. The summary gives each row's
spread (interquartile range over rounds, as a ratio) where this script measured it: read a difference
smaller than the spread as noise. Not a timed test.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.dirname(os.path.abspath(__file__))
GOALS = {"nan-break": "≤ 1.05×", "nan-break --blocks": "≤ 1.05×", "nan-break, hidden 512": "≤ 1.05×",
         "nan-break --blocks, hidden 512": "≤ 1.05×", "nan-break --grad": "≤ 1.10×",
         "nan-break --blocks --grad": "≤ 1.10×", "nan-break --grad, hidden 512": "≤ 1.10×",
         "nan-break --blocks --grad, hidden 512": "≤ 1.10×", "nan-break host reads per forward": "1 (GPU)",
         "bm if COND (false), generate()": "≤ 1.05×",
         "bm pending": "≤ 1.02×", "return out of a forward": "≤ 1.05×", "next over generate()": "≤ 1.05×",
         "statediff snap, 64 layers": "≤ 30 ms", "first prompt": "≤ pdb++", "first prompt, terminal": "≤ pdb++"}


def _spread(values: list[float], base: float) -> str:
    if len(values) < 4:
        return "—"
    q = statistics.quantiles(values, n=4)
    return f"±{(q[2] - q[0]) / base / 2:.2f}"


def nan_rows(rounds: int, iters: int) -> list[tuple[str, str, str, str, str, str]]:
    import torch

    from llmpdb.forward.nan_blocks import check_blocks
    from llmpdb.forward.nan_break import NanBreak
    from tiny_models import tiny_llama

    torch.set_num_threads(1)
    tiny = (tiny_llama(), torch.randint(3, 200, (2, 32)), iters)
    # the same rows on a model whose matmuls are not tiny: the checks' fixed cost against real work
    wider = (tiny_llama(hidden_size=512, intermediate_size=1376, num_attention_heads=8, num_key_value_heads=4,
                        head_dim=64, num_hidden_layers=4, vocab_size=1024),
             torch.randint(3, 1000, (2, 128)), max(2, iters // 8))
    now = {}

    def never(frame, header):
        raise AssertionError(f"the benchmark must not stop: {header}")

    def forward() -> float:
        model, ids, count = now["model"], now["ids"], now["iters"]
        start = time.process_time()
        with torch.no_grad():
            for _ in range(count):
                model(ids)
        return time.process_time() - start

    def forward_backward() -> float:
        model, ids, count = now["model"], now["ids"], now["iters"]
        start = time.process_time()
        for _ in range(count):
            model(ids).logits.sum().backward()
        return time.process_time() - start

    def armed(run, grad, blocks):
        def variant():
            engine = NanBreak(never)
            engine.arm(grad=grad, roots=[now["model"]], blocks=blocks)
            if grad:
                engine.arm(roots=[now["model"]], blocks=blocks)
            try:
                return run()
            finally:
                engine.disarm()
        return variant

    def nothing(module, args, output):  # the least a check at each hooked call costs: off the fast path
        return None

    def read(module, args, output):  # the reads alone: one t.sum().item() per floating output tensor
        for t in (output,) if type(output) is torch.Tensor else (output if type(output) is tuple else ()):
            if type(t) is torch.Tensor and t.is_floating_point():
                t.sum().item()

    def hooked(run, blocks, hook):
        def variant():  # ``hook`` where the checks hook: each block, or every module call
            if blocks:
                handles = [block.register_forward_hook(hook) for block in check_blocks(now["model"])]
            else:
                handles = [torch.nn.modules.module.register_module_forward_hook(hook)]
            try:
                return run()
            finally:
                for handle in handles:
                    handle.remove()
        return variant

    def anomaly(run):
        def variant():
            with torch.autograd.detect_anomaly(check_nan=True):
                return run()
        return variant

    rows = []
    for label, (model, ids, count), run, grad, blocks in (
            ("nan-break", tiny, forward, False, False),
            ("nan-break --blocks", tiny, forward, False, True),
            ("nan-break --grad", tiny, forward_backward, True, False),
            ("nan-break --blocks --grad", tiny, forward_backward, True, True),
            ("nan-break, hidden 512", wider, forward, False, False),
            ("nan-break --blocks, hidden 512", wider, forward, False, True),
            ("nan-break --grad, hidden 512", wider, forward_backward, True, False),
            ("nan-break --blocks --grad, hidden 512", wider, forward_backward, True, True)):
        now.update(model=model, ids=ids, iters=count)
        variants = {"plain": run, "armed": armed(run, grad, blocks), "anomaly": anomaly(run),
                    "floor": hooked(run, blocks, nothing), "reads": hooked(run, blocks, read)}
        for func in variants.values():
            func()
        times = {name: [] for name in variants}
        for _ in range(rounds):
            for name, func in variants.items():
                times[name].append(func())
        base = statistics.median(times["plain"])
        ours = statistics.median(times["armed"])
        hook = "no-op hooks on the blocks" if blocks else "a no-op global hook"
        rows.append((label, f"{ours / base:.2f}× {_spread(times['armed'], base)}", "—", "—",
                     f"{statistics.median(times['anomaly']) / base:.2f}×",
                     f"plain {base / count * 1000:.2f} ms/pass; {hook}: "
                     f"{statistics.median(times['floor']) / base:.2f}×, doing only the reads: "
                     f"{statistics.median(times['reads']) / base:.2f}×"))
    model, ids, _ = tiny
    rows.append(("nan-break host reads per forward", *_read_counts(model, ids, never), "—", "—", "—",
                 "`.item()` calls (each a host sync on a GPU), torch profiler, one no_grad forward"))
    assert not torch.nn.modules.module._global_forward_hooks, "a global hook was left installed"
    return rows


def _read_counts(model, ids, stopper) -> tuple[str]:
    """Host reads of one forward, counted with the torch profiler: every module, blocks read at once (the
    CPU), blocks read once per forward (a GPU's device tensors; ``defer_on_cpu`` takes that path here)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from llmpdb.forward.nan_break import NanBreak

    def reads(blocks, deferred) -> int:
        engine = NanBreak(stopper)
        engine.defer_on_cpu = deferred
        engine.arm(roots=[model], blocks=blocks)
        try:
            with torch.no_grad():
                model(ids)
                with profile(activities=[ProfilerActivity.CPU]) as prof:
                    model(ids)
        finally:
            engine.disarm()
        return sum(e.count for e in prof.key_averages() if e.key == "aten::_local_scalar_dense")

    return (f"--blocks: {reads(True, True)} (as on a GPU); read at once (CPU): {reads(True, False)}; "
            f"every module: {reads(False, False)}",)


def snap_rows(rounds: int) -> list[tuple[str, str, str, str, str, str]]:
    from llmpdb.inspect.snapshot import take_snapshot
    from llmpdb.render.statediff import render_snapshot
    from tiny_models import tiny_llama

    model = tiny_llama(num_hidden_layers=64)
    times = []
    for _ in range(rounds + 1):
        start = time.process_time()
        render_snapshot(take_snapshot(model, name="bench"))
        times.append(time.process_time() - start)
    times = times[1:]  # the first one warms caches up
    median = statistics.median(times)
    count = sum(1 for _ in model.parameters())
    return [("statediff snap, 64 layers", f"{median * 1000:.0f} ms {_spread(times, 1e-3)} ms", "—", "—", "—",
             f"{count} tensors, CPU ms")]


def _run(script: str, args: list[str], timeout: float) -> str:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        done = subprocess.run([sys.executable, os.path.join(HERE, script), *args], capture_output=True, text=True,
                              timeout=timeout, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return f"({script} ran past {timeout:.0f} s)"
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    print(f"\n$ python bench/{script} {' '.join(args)}")
    print("\n".join(lines) if lines else done.stderr[-2000:])
    return done.stdout


def bm_rows(rounds: int, tokens: int) -> list[tuple[str, str, str, str, str, str]]:
    out = _run("module_breakpoints_bench.py", ["--rounds", str(rounds), "--tokens", str(tokens)], 600)
    found = dict(re.findall(r"^(cond false|pending|pending, seen|global hook)\s+[\d.]+\s+([\d.]+)\s*$", out,
                            re.M))
    note = f"a no-op global pre-hook: {found.get('global hook', '?')}×"
    return [("bm if COND (false), generate()", f"{found.get('cond false', '?')}×", "—", "—", "—", note),
            ("bm pending", f"{found.get('pending', '?')}×", "—", "—", "—",
             f"{note}; the model's one look made before the clock: {found.get('pending, seen', '?')}×")]


def step_rows(rounds: int, iters: int) -> list[tuple[str, str, str, str, str, str]]:
    out = _run("run_to_breakpoint.py", ["--rounds", str(rounds), "--iters", str(iters), "--rows", "return,next"],
               600)
    header = re.search(r"^\| setup \|(.*)\|\s*$", out, re.M)  # pdb++ is left out where it does not import
    columns = [c.strip() for c in header.group(1).split("|")] if header else []
    rows = []
    for label, row in (("return out of a forward", "return out of a forward"),
                       ("next over generate()", "next over the call")):
        match = re.search(rf"^\| {re.escape(row)} \|(.*)\|\s*$", out, re.M)
        cells = dict(zip(columns, (c.strip() for c in match.group(1).split("|")))) if match else {}
        if "llmpdb" not in cells:
            rows.append((label, "?", "?", "?", "—", "not measured (see the output above)"))
            continue
        rows.append((label, f"{cells['llmpdb']}×", f"{cells.get('stdlib pdb', '?')}×",
                     f"{cells['pdb++']}×" if "pdb++" in cells else "n/a", "—",
                     f"arming aside {cells.get('llmpdb, arming aside', '?')}×"))
    return rows


def prompt_rows(rounds: int) -> list[tuple[str, str, str, str, str, str]]:
    out = _run("startup_bench.py", ["--only", "prompt", "--rounds", str(rounds)], 600)
    cells = dict((name, value) for name, value in re.findall(r"(stdlib pdb|pdb\+\+|llmpdb) ([\d.]+) s", out))
    ms = {name: f"{float(value) * 1000:.0f} ms" for name, value in cells.items()}
    return [("first prompt", ms.get("llmpdb", "?"), ms.get("stdlib pdb", "?"), ms.get("pdb++", "n/a"), "—",
             "wall, a whole process")]


def _to_prompt(command: list[str], env: dict, prompt: bytes) -> float:
    """Wall seconds from spawning ``command`` in a pty until ``prompt`` is drawn; then ``q``, and it is reaped."""
    import pexpect

    start = time.perf_counter()
    child = pexpect.spawn(command[0], command[1:], env=env, cwd=ROOT, timeout=60, dimensions=(40, 200))
    try:
        child.expect_exact(prompt)
        elapsed = time.perf_counter() - start
        child.sendline("q")
        child.expect(pexpect.EOF)
    finally:
        if child.isalive():
            child.kill(9)
        child.close()
    return elapsed


def terminal_prompt_rows(rounds: int) -> list[tuple[str, str, str, str, str, str]]:
    """The first prompt in a terminal (prompt_toolkit's for llmpdb), against stdlib pdb and pdb++."""
    import importlib.util

    if importlib.util.find_spec("pexpect") is None:
        return [("first prompt, terminal", "?", "?", "?", "—", "pexpect missing")]
    sys.path.insert(0, HERE)
    from startup_bench import EXAMPLE, debuggers

    tools = [(name, command + [EXAMPLE], dict(env, TERM="xterm"), b"(llmpdb) " if name == "llmpdb" else b"(Pdb")
             for name, command, env in debuggers()]
    runnable = []
    for tool in tools:
        try:
            _to_prompt(*tool[1:])  # warm-up: byte-code caches; a tool that cannot start here is left out
        except Exception as error:  # pdb++ 0.12.1 on 3.13: "module 'pdb' has no attribute 'itertools'"
            print(f"({tool[0]} left out of the terminal row: {type(error).__name__})")
            continue
        runnable.append(tool)
    tools = runnable
    times = {name: [] for name, *_ in tools}
    for _ in range(rounds):
        for name, command, env, prompt in tools:
            times[name].append(_to_prompt(command, env, prompt))
    ms = {name: f"{statistics.median(values) * 1000:.0f} ms" for name, values in times.items()}
    spread = _spread(times["llmpdb"], 1e-3)
    return [("first prompt, terminal", f"{ms['llmpdb']} {spread} ms", ms["stdlib pdb"], ms.get("pdb++", "n/a"), "—",
             "wall, in a pty (pexpect)")]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", default="nan,snap,bm,step,prompt")
    parser.add_argument("--quick", action="store_true", help="fewer rounds and iterations (a smoke run)")
    args = parser.parse_args(argv)
    only = set(args.only.split(","))
    rounds = 3 if args.quick else args.rounds
    warnings.simplefilter("ignore")
    sys.path.insert(0, ROOT)
    sys.path.append(os.path.join(ROOT, "tests"))  # appended: tests/inspect/ must not shadow the stdlib inspect
    rows = []
    if "nan" in only:
        rows += nan_rows(rounds, 5 if args.quick else 20)
    if "snap" in only:
        rows += snap_rows(rounds)
    if "bm" in only:
        rows += bm_rows(rounds, 4 if args.quick else 16)
    if "step" in only:
        rows += step_rows(rounds, 2 if args.quick else 10)
    if "prompt" in only:
        rows += prompt_rows(rounds)
        rows += terminal_prompt_rows(rounds)
    print(f"\nPython {sys.version.split()[0]}; ratios to plain of the same run (first prompt: wall time)")
    print("| armed | llmpdb | stdlib pdb | pdb++ | detect_anomaly | goal | note |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for label, ours, pdb, pdbpp, anomaly, note in rows:
        print(f"| {label} | {ours} | {pdb} | {pdbpp} | {anomaly} | {GOALS[label]} | {note} |")


if __name__ == "__main__":
    main()
