"""The ``diverge`` command: run one forward twice, the second time changed, and find where the outputs part.

Usage (at the prompt)::

    diverge model(**inputs) --vs dtype=bfloat16              a bfloat16 copy of the model (inputs cast)
    diverge model(**inputs) --vs attn_implementation=eager   the same model, another attention kernel
    diverge model(**inputs) --vs reference                   a second model with the same module tree
    diverge model(**inputs) --vs ckpt=out/checkpoint-500     a copy of the model with those weights
    diverge model(x) --vs dtype=float16 --rtol 1e-2 --atol 1e-3 --max-mem 8G --all
    diverge model(**inputs) --vs dtype=bf16 --break          then stop where the bf16 copy's run differs

EXPR must be a call of a model in the frame (``model(...)``, ``self.lm(...)``, ``model.generate(...)``):
the callee's model is rebound to the variant in a copy of the frame's locals for the second run, so the
user's variables never change. Both runs go under ``torch.no_grad`` from the same RNG state, which is
restored afterwards; a KV cache passed in is copied for each run. See ``llmpdb.forward.diverge`` for the
hooks and ``llmpdb.forward.diverge_variants`` for the settings.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import sys

from ..inspect.kinds import is_hf, is_module, module_attr
from ..units import human_bytes, plural
from ._command import CommandError, command, parse_args
from .diverge_break import DivergeBreak

__all__ = ["DivergeCommands", "bind_model", "parse_size"]

MODEL_VAR = "__llmpdb_diverge_model__"
DEFAULT_BUDGET = 4 * 2**30
_UNITS = {"": 1, "B": 1, "K": 2**10, "KB": 2**10, "KIB": 2**10, "M": 2**20, "MB": 2**20, "MIB": 2**20,
          "G": 2**30, "GB": 2**30, "GIB": 2**30, "T": 2**40, "TB": 2**40, "TIB": 2**40}


def parse_size(text: str) -> int:
    """Usage: ``parse_size("512M")`` -> 536870912; ``2G``, ``1.5GiB``, ``100000`` (bytes)."""
    body = text.strip().upper()
    digits = body.rstrip("KMGTIB")
    unit = body[len(digits):]
    if unit not in _UNITS or not digits:
        raise ValueError("a size such as 512M or 8G")
    value = float(digits) * _UNITS[unit]
    if value <= 0:
        raise ValueError("needs a size > 0")
    return int(value)


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError("needs a number >= 0") from None
    if not 0 <= value < float("inf"):
        raise ValueError("needs a finite number >= 0")
    return value


def _lookup(name: str, local_map: dict, global_map: dict):
    if name in local_map:
        return local_map[name]
    if name in global_map:
        return global_map[name]
    builtins = global_map.get("__builtins__")
    return (builtins if isinstance(builtins, dict) else vars(builtins)).get(name) if builtins is not None else None


def bind_model(expr: str, local_map: dict, global_map: dict):
    """Usage: ``code, model, names = bind_model("model(**inputs)", locals, globals)``.

    The expression's callee model is replaced by the name ``MODEL_VAR`` (bind it in the locals to run
    EXPR on another model); ``names`` are the other variables the expression reads."""
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as exc:
        raise CommandError(f"invalid expression {expr!r}: {exc.msg}") from None
    call = tree.body
    if not isinstance(call, ast.Call):
        raise CommandError(f"{expr!r} is not a call: EXPR must call a model (diverge model(**inputs) --vs ...)")
    node = call.func
    if isinstance(node, ast.Attribute) and node.attr in ("forward", "__call__", "generate"):
        node = node.value
    if isinstance(node, ast.Name):
        model = _lookup(node.id, local_map, global_map)
    else:
        try:
            model = eval(compile(ast.Expression(node), "<llmpdb diverge>", "eval"), global_map, dict(local_map))
        except Exception as exc:
            raise CommandError(f"cannot evaluate {ast.unparse(node)!r}: {type(exc).__name__}: {exc}") from None
    if not is_module(model):
        raise CommandError(f"{ast.unparse(node)!r} is not a model (an nn.Module): EXPR must call a model in the frame")

    class Rebind(ast.NodeTransformer):
        def visit(self, current):
            if current is node:
                return ast.copy_location(ast.Name(MODEL_VAR, ast.Load()), current)
            return super().visit(current)

    tree = ast.fix_missing_locations(Rebind().visit(tree))
    names = sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id != MODEL_VAR})
    return compile(tree, "<llmpdb diverge>", "eval"), model, names


def _callee(expr: str) -> ast.expr:
    node = ast.parse(expr.strip(), mode="eval").body.func
    return node.value if isinstance(node, ast.Attribute) and node.attr in ("forward", "__call__", "generate") else node


def _callee_note(expr: str, model, local_map: dict) -> str | None:
    """Names the model the second run changes when the frame holds other models (they stay as they are)."""
    others = [k for k, v in local_map.items() if v is not model and not k.startswith("__") and is_module(v)]
    if not others:
        return None
    shown = ", ".join(others[:3]) + (f" (+{len(others) - 3})" if len(others) > 3 else "")
    return (f"the model changed in run 2 is {ast.unparse(_callee(expr))} ({type(model).__name__}), the one EXPR "
            f"calls; not {shown}")


def _side_effect_note(expr: str) -> str | None:
    """EXPR runs once per run: calls in it besides the model's (``log.append(x)``) and ``:=`` ran twice."""
    tree = ast.parse(expr.strip(), mode="eval")
    calls = [ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call) and n is not tree.body]
    if any(isinstance(n, ast.NamedExpr) for n in ast.walk(tree)):
        calls.append(":=")
    if not calls:
        return None
    shown = ", ".join(dict.fromkeys(calls[:3]))
    return f"EXPR is evaluated once per run: its other calls ({shown}) ran twice, side effects included"


def _paths(root) -> dict[int, str]:
    """Every module's path in EXPR's model as ``named_modules`` gives it (a wrapper's ``module.`` kept), so
    that each path is one module of that tree (``--break`` finds its module by it)."""
    return {id(module): name for name, module in root.named_modules()}


def _tree(root) -> list[tuple[str, str]]:
    return [(name, type(m).__name__) for name, m in root.named_modules()]


def _private_caches(value):
    """A KV cache (or a dict holding one) passed to EXPR, deep-copied so neither run changes the program's."""
    if is_hf(value, "Cache"):
        return copy.deepcopy(value), True
    if type(value) is dict and any(is_hf(v, "Cache") for v in value.values()):
        return {k: (copy.deepcopy(v) if is_hf(v, "Cache") else v) for k, v in value.items()}, True
    return value, False


def module_config_missing(model) -> bool:
    return not is_hf(module_attr(model, "config", None), "PretrainedConfig", "PreTrainedConfig")


def _run_locals(names, local_map, global_map, model, cast_to, notes) -> dict:
    """The locals one run evaluates EXPR in: a copy of the frame's, the model bound to ``MODEL_VAR``, a KV
    cache deep-copied, floating tensors cast to ``cast_to`` (new containers); the frame's are untouched."""
    from ..forward.diverge_variants import cast_floats

    run_locals = dict(local_map)
    for name in names:
        value, copied = _private_caches(_lookup(name, local_map, global_map))
        if copied:
            notes.append(f"{name} holds a KV cache: each run got its own copy (the program's is unchanged)")
        if copied or cast_to is not None:
            run_locals[name] = cast_floats(value, cast_to) if cast_to is not None else value
    run_locals[MODEL_VAR] = model
    return run_locals


def _raised_text(exc: BaseException) -> str:
    """``RuntimeError: boom``; a bare ``KeyboardInterrupt`` (Ctrl-C) without a dangling colon."""
    text = (str(exc).strip().splitlines() or [""])[0][:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _first_dtype(model):
    for t in model.parameters():
        return t.dtype
    return None


def _padding_note(attends, rows) -> str:
    """A padded batch: where the comparison looked, and whether differences were confined to padding."""
    masked, total = int((~attends).sum()), attends.numel()
    text = (f"attention_mask masks {masked} of {total} (batch, seq) positions: tensors shaped (batch, seq, …) "
            "are compared where it attends")
    outside = sum(1 for c in rows if any(d.masked_beyond for d in c.outputs))
    if outside:
        text += (f"; {plural(outside, 'module call')} differ at masked positions only (a kernel's output there is "
                 "no result)")
    return text


class DivergeCommands(DivergeBreak):
    """Command mixin: ``diverge``."""

    def _diverge_variant(self, setting, model, notes):
        """``(second model, text, dtype to cast inputs to or None, attention context)``."""
        from ..forward.diverge_variants import (SettingError, attn_implementation, checkpoint_copy, current_attn,
                                                dtype_copy)
        from ..inspect.safe import short_dtype

        name = type(model).__name__
        if setting.kind == "dtype":
            floats = [t for t in list(model.parameters()) + list(model.buffers()) if t.is_floating_point()]
            if all(t.dtype == setting.value for t in floats):
                return model, f"the model itself ({name} is already {short_dtype(setting.value)})", setting.value, None
            try:
                cast_model, cost = dtype_copy(model, setting.value)
            except MemoryError as exc:
                raise CommandError(str(exc)) from None
            return cast_model, (f"a {setting.text[6:]} copy of {name} ({human_bytes(cost)}, freed afterwards); "
                          "floating inputs cast"), setting.value, None
        if setting.kind == "ckpt":
            try:
                twin, cost, found = checkpoint_copy(model, setting.value)
            except SettingError as exc:
                raise CommandError(str(exc)) from None
            notes.extend(found)
            text = f"a copy of {name} with the weights of {setting.value} ({human_bytes(cost)}, freed afterwards)"
            return twin, text, None, None
        if setting.kind == "attn":
            before = current_attn(model)
            if module_config_missing(model):
                raise CommandError(f"{name} has no transformers config: attn_implementation cannot be set")
            if before == setting.value:
                notes.append(f"{name} already uses attn_implementation={before}: both runs are the same")
            return (model, f"the same {name} with attn_implementation={setting.value} (was {before}; restored "
                    "afterwards)", None, lambda: attn_implementation(model, setting.value))
        try:
            other = self.eval_in_frame(setting.value)
        except CommandError as exc:
            raise CommandError(f"--vs {exc}") from None
        if not is_module(other):
            raise CommandError(f"--vs {setting.text}: not a model (an nn.Module) and not KEY=VALUE "
                               "(dtype=X, attn_implementation=X, ckpt=PATH)")
        mine, theirs = _tree(model), _tree(other)
        if mine != theirs:
            at = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
            a = f"{mine[at][0] or '(root)'} ({mine[at][1]})" if at < len(mine) else "nothing"
            b = f"{theirs[at][0] or '(root)'} ({theirs[at][1]})" if at < len(theirs) else "nothing"
            raise CommandError(f"{setting.text} has another module tree: module {at} is {a} in {name}, {b} in it")
        if other is model:
            notes.append(f"{setting.text} is the same object as the model: both runs are the same")
        return other, f"{setting.text} ({type(other).__name__}, same module tree)", None, None

    @command
    def do_diverge(self, arg):
        """diverge EXPR --vs SETTING [--rtol X] [--atol X] [--max-mem SIZE] [--all] [--break]
        Find the first module whose outputs change when SETTING changes. EXPR (a call of a model in the
        frame) runs twice under forward hooks on every module, the second time changed by SETTING; the
        report lists module by module, in the order outputs are produced, the max abs and max rel error
        of the outputs, up to the first module whose outputs differ beyond the tolerance: its path and
        class, the first differing tensor, and whether its inputs already differed (the difference then
        arose in the enclosing module's own code).
          --vs dtype=X                 a deep copy of the model in X (bfloat16, float16, float32, float64);
                                       floating inputs cast; the model itself is never cast
          --vs attn_implementation=X   the same model with another attention kernel (eager, sdpa...),
                                       restored afterwards
          --vs ckpt=PATH               a deep copy of the model with a checkpoint's weights (safetensors,
                                       a weights-only torch.save file, a sharded folder)
          --vs OTHER                   an expression giving a second model with the same module tree
          --rtol/--atol                |a-b| <= atol + rtol*|a| (default per dtype, the looser of the pair:
                                       f32 1.3e-6/1e-5, f16 1e-3/1e-3, bf16 1.6e-2/1e-2)
          --max-mem SIZE               memory for the first run's copies (default: 25% of free, at most 4G);
                                       beyond it only the calls recorded so far are compared
          --all                        list every compared call, not the last 12
          --break                      then run the second variant once more and stop, in a recursive
                                       debugger, at the entry of the diverging module's forward
        Both runs go under no_grad from the same RNG state (restored afterwards); hooks are removed
        however the runs end. This runs the model twice and reads values.
        Example: diverge model(**inputs) --vs dtype=bfloat16"""
        from ..forward.diverge_variants import SettingError, dropout_note, parse_setting
        from ..render.diverge import render_diverge

        args = parse_args(arg, self.do_diverge, flags={"--all", "--break"},
                          options={"--vs": str, "--rtol": _tolerance, "--atol": _tolerance, "--max-mem": parse_size})
        torch = sys.modules.get("torch")
        if torch is None or "torch.nn.modules.module" not in sys.modules:
            raise CommandError("torch is not imported in this program: no model to run")
        if args.value("--vs") is None:
            raise CommandError("--vs SETTING is required (usage: diverge EXPR --vs SETTING)")
        if not args.rest:
            raise CommandError("an expression is required (usage: diverge EXPR --vs SETTING)")
        try:
            setting = parse_setting(args.value("--vs"))
        except SettingError as exc:
            raise CommandError(str(exc)) from None
        frame = self.current_frame()
        if frame is None:
            raise CommandError("no frame to evaluate in")
        local_map, global_map = self.frame_locals(), frame.f_globals
        code, model, names = bind_model(args.rest, local_map, global_map)
        notes = [n for n in [dropout_note(model), _callee_note(args.rest, model, local_map),
                             _side_effect_note(args.rest)] if n]
        second_model, variant, cast_to, attn_ctx = self._diverge_variant(setting, model, notes)
        first_locals = _run_locals(names, local_map, global_map, model, None, notes)
        second_locals = _run_locals(names, local_map, global_map, second_model, cast_to, [])
        owned = [model] + ([second_model] if setting.kind in ("model", "attn") and second_model is not model else [])
        report = self._diverge_run(args, code, model, second_model, first_locals, second_locals, attn_ctx, torch,
                                   owned)
        report.setting, report.variant, report.notes = setting.text, variant, notes + report.notes
        del first_locals, second_locals
        self.message(render_diverge(report, width=self.out_width(), show_all=args.flag("--all"),
                                    style=self.out_style()))
        if args.flag("--break"):
            self._diverge_rerun(report, code, second_model, attn_ctx, torch,
                                lambda: _run_locals(names, local_map, global_map, second_model, cast_to, []))

    def _diverge_rerun(self, report, code, second_model, attn_ctx, torch, make_locals) -> None:
        from ..forward.diverge_variants import kept_buffers, same_randomness

        first = report.first
        if first is None:
            raise CommandError("--break: no module differs, nothing to stop at")
        target = dict(second_model.named_modules()).get("" if first.path == "(root)" else first.path)
        if target is None:
            raise CommandError(f"--break: {first.path} is not a module of the second model")
        global_map = self.current_frame().f_globals

        def run_once():
            run_locals = make_locals()
            with kept_buffers(torch, second_model), same_randomness(torch) as reset, torch.no_grad():
                reset()
                with (attn_ctx() if attn_ctx is not None else contextlib.nullcontext()):
                    eval(code, global_map, run_locals)

        header = (f"diverge --break: {first.path} ({first.class_name}) starts its forward in run 2 "
                  f"({report.setting}); `c` finishes the run (its result is dropped)")
        failure = self._diverge_break(target, header, run_once)
        if failure is not None:
            self.error(f"diverge: {failure}")

    def _diverge_run(self, args, code, model, second_model, first_locals, second_locals, attn_ctx, torch, owned):
        from ..forward.diverge import RunComparer, RunRecorder, hooked_modules
        from ..forward.diverge_variants import SettingError, free_bytes, kept_buffers, same_randomness
        from ..inspect.diverge_records import DivergeReport, default_tolerance
        from ..inspect.safe import short_dtype
        from ..render.diverge import number
        from ..render.progress import Progress

        rtol, atol = args.value("--rtol"), args.value("--atol")
        budget = args.value("--max-mem")
        if budget is None:
            device = next(iter(model.parameters()), torch.empty(0)).device
            free = free_bytes(device)
            budget = min(DEFAULT_BUDGET, free // 4) if free else DEFAULT_BUDGET
        d1, d2 = _first_dtype(model), _first_dtype(second_model)
        r, a = default_tolerance(d1, d2) if d1 is not None and d2 is not None else (None, None)
        tol = (f"rtol {number(rtol if rtol is not None else r)}, atol {number(atol if atol is not None else a)}"
               + ("" if rtol is not None and atol is not None else
                  f" ({short_dtype(d1)} vs {short_dtype(d2)} defaults)"))
        first = RunRecorder(hooked_modules(model, _paths(model)), budget)
        second = RunComparer(hooked_modules(second_model, _paths(second_model)), first, rtol=rtol, atol=atol)
        report = DivergeReport(args.rest, "", "", tolerance=tol, budget=budget)
        global_map = self.current_frame().f_globals
        bar = Progress("diverge: run 1, module calls", enabled=self.out_is_terminal())
        first.progress = bar.update
        second.progress = lambda done: bar.update(done, first.calls)
        with bar, kept_buffers(torch, *owned) as restored, same_randomness(torch) as reset, torch.no_grad():
            try:
                with first.hooked():
                    eval(code, global_map, first_locals)
            except BaseException as exc:  # SystemExit/KeyboardInterrupt from the user's code end only this run
                report.errors.append(f"run 1 raised {_raised_text(exc)} (nothing compared; hooks removed)")
            first.forget_sharing()
            if not report.errors:
                reset()
                bar.label = "diverge: run 2, module calls"
                try:
                    with (attn_ctx() if attn_ctx is not None else contextlib.nullcontext()):
                        with second.hooked():
                            eval(code, global_map, second_locals)
                except SettingError as exc:
                    raise CommandError(str(exc)) from None
                except BaseException as exc:
                    report.errors.append(f"run 2 raised {_raised_text(exc)} (compared up to there; hooks removed)")
        report.rows, report.first, report.structure = second.rows, second.first, second.structure
        report.calls_first, report.calls_second = first.calls, second.calls
        report.recorded, report.used, report.over_budget_at = first.recorded, first.used, first.over_budget_at
        report.notes = [f"a hook failed {p}" for p in (first.problems + second.problems)[:3]]
        if first.attends is not None:
            report.notes.append(_padding_note(first.attends, second.rows))
        if restored:
            shown = ", ".join(restored[:3]) + (", ..." if len(restored) > 3 else "")
            report.notes.append(f"the runs changed {plural(len(restored), 'buffer')} in place ({shown}): values put back")
        return report
