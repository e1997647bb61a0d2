"""Model-aware navigation: ``stack-model``, ``root-model``, ``break-module``, ``clear-module``, ``where-forward``.

Usage (at the prompt)::

    stack-model [--all]        sm      the stack as the model sees it, with the path header
    root-model [EXPR | --auto]         show or set the root model that names modules (alias: model)
    break-module PATTERN [if CONDITION] [--after N] [--once]    bm
    clear-module N|all
    where-forward [EXPR] [--edit]      wf

``render_stop_header(frame)`` is the one-line path summary; it is registered as a stop note, so it is
printed at every stop where a model is in sight. With two models of one class in sight (a teacher and a
student), module names start with the root's variable (``teacher.model.layers.1``). Every read of a
frame's locals goes through ``frame_locals``, so edits made at the prompt (``!x = 99``) stand.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sys
import weakref

from ..session import SESSION, register_stop_note
from ..units import plural
from ._command import CommandError, command, parse_args, whole_number

if TYPE_CHECKING:  # annotations only: the module is imported at first use
    from ..render.style import Style

__all__ = ["NavigationCommands", "render_stack_model", "render_stop_header", "user_root", "set_user_root"]

_ROOT_KEY = "navigation-root"


_count = whole_number(0, 10**9)


def _root_state() -> dict:
    return SESSION.memory(_ROOT_KEY, dict)


def user_root():
    """Usage: ``user_root()``; the root model set with ``root-model EXPR``, or None (automatic)."""
    ref = _root_state().get("ref")
    return ref() if ref is not None else None


def set_user_root(module, expr: str | None = None) -> None:
    """Usage: ``set_user_root(model, "model")``; ``set_user_root(None)`` goes back to automatic."""
    state = _root_state()
    state.clear()
    if module is not None:
        state["ref"] = weakref.ref(module)
        state["expr"] = expr


def _tree_names(stack, index: int, entries) -> dict[int, str]:
    """``{tree: variable}`` for the models on the stack, when two models of one class are in sight."""
    from ..inspect.root_names import ambiguous_root_names, models_in_sight, tree_root_names
    names = ambiguous_root_names(models_in_sight(stack, index))
    return tree_root_names(entries, names) if names else {}


def _path_header(stack, index: int, style: Style | None, width: int | None = None) -> str | None:
    from ..inspect.modules import model_stack
    from ..inspect.path_summary import path_summary
    from ..render.modules import render_path_summary
    summary = path_summary(stack, index, user_root())
    root_name = None
    if summary.module is not None:
        trees = _tree_names(stack, index, model_stack(stack[: index + 1], user_root()))
        root_name = trees.get(summary.module.tree)
    return render_path_summary(summary, style, root_name=root_name, width=width)


def render_stack_model(stack, index: int, *, width: int, style: Style | None = None, show_all: bool = False) -> str:
    """Usage: ``render_stack_model(stack, len(stack) - 1, width=100)``; what ``stack-model`` prints for a
    ``[(frame, lineno)]`` stack (pdb's, or a traceback's): the path header, then the table."""
    from ..inspect.modules import model_stack
    from ..render.modules import render_model_stack
    header = _path_header(stack, index, style, width)
    entries = model_stack(stack, user_root())
    table = render_model_stack(entries, current=index, show_all=show_all, width=width, style=style,
                               root_names=_tree_names(stack, index, entries))
    return f"{header}\n{table}" if header else table


def render_stop_header(frame, style: Style | None = None, width: int | None = None) -> str | None:
    """Usage: ``render_stop_header(frame)`` -> ``"path: eval, no_grad, ... | model.layers.1.self_attn
    (LlamaAttention)"``, or None when no module runs on the stack and no model was set."""
    if frame is None or "torch" not in sys.modules:
        return None  # without torch no module runs and none was set
    from ..inspect.modules import frame_stack
    stack = frame_stack(frame)
    return _path_header(stack, len(stack) - 1, style, width)


@register_stop_note
def module_breakpoint_problems_note(frame, debugger) -> list[str]:
    """Problems the module breakpoints met while the program ran (a hook that failed), said at the next stop."""
    module = sys.modules.get("llmpdb.forward.breakpoints")
    if module is None:
        return []  # never imported: no module breakpoint was ever set, so none failed
    return [f"llmpdb: {line}" for line in module.module_breakpoints().take_messages()]


@register_stop_note
def model_path_note(frame, debugger) -> str | None:
    """The stop note: the path header, coloured like the debugger's output."""
    style_of, width_of = getattr(debugger, "out_style", None), getattr(debugger, "out_width", None)
    return render_stop_header(frame, style_of() if callable(style_of) else None,
                              width_of() if callable(width_of) else None)


def _pending_text(pattern: str, roots: list, near) -> str:
    """What a pending breakpoint waits for, said when it is set."""
    if "." in pattern:
        text = f"pending: arms on the first {'new ' if roots else ''}model whose forward runs"
    else:
        text = f"no module yet: armed on {pattern} modules as they are created"
    if roots:
        classes = ", ".join(dict.fromkeys(type(r).__name__ for r in roots))
        text += f" (nothing matches in {classes} now{'; near: ' + ', '.join(near) if near else ''})"
    if any(c in pattern for c in _REGEX_ONLY):
        text += "; patterns are globs (* ? [..]), not regular expressions"
    return text


_REGEX_ONLY = set("|\\(){}+^$\"'")  # never needed by a glob: the pattern was meant as a regex (or quoted)


class NavigationCommands:
    """Command mixin: the stack as the model sees it, module breakpoints, where a forward is defined."""

    # ---- helpers ------------------------------------------------------------------------------------
    def model_roots(self) -> list:
        return list(self._nav_roots()[0])

    def _nav_roots(self) -> tuple[list, str]:
        """The root models and where they came from ("set", "stack" or "locals")."""
        pairs, source = self._nav_root_pairs()
        return [m for _, m in pairs], source

    def _nav_root_pairs(self) -> tuple[list[tuple[str, object]], str]:
        """``[(variable or "", root)]`` and where they came from ("set", "stack" or "locals")."""
        from ..inspect.modules import model_stack, models_in, top_level_models
        root = user_root()
        if root is not None:
            return [(_root_state().get("expr") or "", root)], "set"
        stack = self.stack_frames()
        entries = model_stack(stack[: self.current_index() + 1] if stack else stack)
        firsts = {}
        for entry in entries:
            if entry.module is not None and entry.module.tree not in firsts:
                firsts[entry.module.tree] = entry.module.module
        if firsts:
            roots = [m for _, m in top_level_models([("", firsts[k]) for k in sorted(firsts)])]
            names = self._nav_names(roots)
            return [((names.get(id(r)) or [""])[0], r) for r in roots], "stack"
        return models_in(self.frame_locals()) or models_in(self.frame_globals()), "locals"

    def _nav_names(self, roots: list) -> dict[int, list[str]]:
        """``{id(root): [variables]}``: the names the roots are bound to in the user's frames, the current
        frame first. Locals are read through ``frame_locals`` (never ``frame.f_locals``, which on 3.11/3.12
        re-reads the frame and undoes an edit made at the prompt)."""
        from ..inspect.frames import frame_locals
        from ..inspect.modules import is_plumbing
        found: dict[int, list[str]] = {}
        ids = {id(r) for r in roots}
        current = self.current_frame()
        frames = [current] if current is not None else []
        frames += [f for f, _ in reversed(self.stack_frames()) if f is not current and not is_plumbing(f)]
        for frame in frames:
            spaces = [self.frame_locals() if frame is current else frame_locals(frame)]
            try:
                spaces.append(dict(frame.f_globals))
            except Exception:  # globals that cannot be listed: the locals still count
                pass
            for space in spaces:
                for name, value in space.items():
                    if name != "self" and id(value) in ids and any(value is r for r in roots):
                        entry = found.setdefault(id(value), [])
                        if name not in entry:
                            entry.append(name)
        return found

    def _nav_aliases(self, roots: list) -> list[str]:
        """Names the roots are bound to in the user's frames (``model`` for ``model.model.layers.1``)."""
        names = []
        expr = _root_state().get("expr")
        if expr and user_root() is not None:
            names.append(expr)
        for entry in self._nav_names(roots).values():
            names.extend(n for n in entry if n not in names)
        return names

    # ---- commands -------------------------------------------------------------------------------------
    @command
    def do_stack_model(self, arg):
        """stack-model [--all]
        The stack as the model sees it: one row per frame running a module's forward (qualified name
        from the root model, class, function, file:line, first tensor argument) plus your own code,
        numbered like `where` so `frame N`, `up` and `down` reach them. The first line is the path
        header (train/eval, grad mode, autocast, labels, KV cache, attention kernel, torch.compile).
        --all   also show the plumbing frames (_call_impl, hooks, decorator wrappers, generate()).
        Alias: sm.
        Example: stack-model --all"""
        args = parse_args(arg, self.do_stack_model, flags={"--all"})
        if args.words:
            raise CommandError(f"unknown argument {args.words[0]!r} (usage: stack-model [--all])")
        stack = self.stack_frames()
        if not stack:
            raise CommandError("no stack (the program is not stopped in a frame)")
        self.message(render_stack_model(stack, self.current_index(), width=self.out_width(),
                                        style=self.out_style(), show_all=args.flag("--all")))

    do_sm = do_stack_model

    @command
    def do_root_model(self, arg):
        """root-model [EXPR | --auto]
        Show or set the root model: the one whose named_modules() give the qualified names; EXPR (a
        module evaluated in the current frame) sets it. By default the root is the outermost module running on the stack,
        else the top-level module among the current frame's variables; with several, each is named by its
        variable. --auto goes back to that.
        Alias: model (under pdb++ a local named `model` is printed instead; use root-model).
        Example: root-model pipe.model"""
        from ..inspect.modules import is_module, unwrap_model
        arg = (arg or "").strip()
        if arg == "--auto":
            set_user_root(None)
            self.message("root-model: automatic (the outermost module on the stack)")
            return
        if arg:
            value = self.eval_in_frame(arg)
            if not is_module(value):
                raise CommandError(f"{arg} is a {type(value).__name__}, not a module (no named_modules/forward)")
            set_user_root(value, arg)
            inner, chain = unwrap_model(value)
            via = "".join(f" -> {attr} ({kind})" for _, kind, attr in chain)
            self.message(f"root-model: {arg} = {type(value).__name__}{via}; names are relative to "
                         f"{type(inner).__name__}")
            return
        pairs, source = self._nav_root_pairs()
        if not pairs:
            self.message("root-model: none in sight (no module on the stack or in the current frame); "
                         "set one with `root-model EXPR`")
            return
        where = {"set": f"set with `root-model {_root_state().get('expr')}`",
                 "stack": "the outermost module on the stack",
                 "locals": "found among the current frame's variables"}[source]
        for name, root in pairs:
            inner, chain = unwrap_model(root)
            via = "".join(f" -> {attr} ({kind})" for _, kind, attr in chain)
            named = f"{name} = " if name and len(pairs) > 1 else ""
            self.message(f"root-model: {named}{type(root).__name__}{via} ({where})")

    @command
    def do_model(self, arg):
        """model [EXPR | --auto]
        The short name of root-model (help root-model). It exists because it is short, but under pdb++ a
        local named `model` is printed instead of running this command; use root-model.
        Example: model --auto"""
        return self.do_root_model(arg)

    @command
    def do_break_module(self, arg):
        """break-module [PATTERN [if CONDITION] [--after N] [--once]]
        Pause at the start of the forward of every module matching PATTERN: in the module's own forward
        frame, with its arguments as locals. PATTERN is a qualified name from the root model
        (model.layers.1.self_attn; a dotted suffix such as layers.1.self_attn is enough), a glob
        (layers.*.mlp, *self_attn; * stays within one dotted part, ** crosses dots) or a class name
        (LlamaAttention, *Attention). Only matching modules get a hook; the others run at full speed.
        A pattern that matches nothing yet stays pending (listed as such): it arms on the first matching
        module created (a class name) or on the first new model whose forward runs, so it can be set at
        a script's first line, before the model exists. A module that runs under torch.compile never
        stops (dynamo skips its Python forward): a warning says so; `python -m llmpdb --no-compile`.
          if CONDITION  evaluated in the forward frame, e.g.  if hidden_states.shape[1] > 1  (prefill only)
          --after N     skip the first N hits (where CONDITION held)
          --once        remove the breakpoint after its first stop
        Without arguments: list the module breakpoints with their hit counts. Alias: bm.
        Example: bm layers.*.self_attn if hidden_states.shape[1] > 1 --once"""
        from ..forward.breakpoints import NoModuleMatch, module_breakpoints
        from ..inspect.module_compile import compiled_warning
        from ..render.modules import render_module_breakpoints
        text = (arg or "").strip()
        engine = module_breakpoints()
        if not text:
            self.message(render_module_breakpoints(engine.breakpoints(), width=self.out_width(),
                                                   style=self.out_style()))
            for line in engine.take_messages():
                self.message(self.out_style().warn(line))
            return
        args = parse_args(text, self.do_break_module, flags={"--once"}, options={"--after": _count})
        after, once, text = args.value("--after", 0), args.flag("--once"), args.rest
        pattern, _, rest = text.partition(" ")
        rest = rest.strip()
        condition = None
        if rest:
            if not rest.startswith("if ") and rest != "if":
                raise CommandError(f"unexpected {rest!r} (usage: break-module PATTERN [if CONDITION] "
                                   "[--after N] [--once])")
            condition = rest[2:].strip()
            if not condition:
                raise CommandError("'if' needs a condition")
        if not pattern:
            raise CommandError("a PATTERN is required (usage: break-module PATTERN [if CONDITION] ...)")
        if pattern.startswith("-"):
            raise CommandError(f"unknown option {pattern!r}")
        pairs, _ = self._nav_root_pairs()
        roots = [m for _, m in pairs]
        try:
            bp = engine.add(pattern, roots, condition=condition, after=after, once=once,
                            aliases=self._nav_aliases(roots), names=[n for n, _ in pairs], pending=True)
        except NoModuleMatch as exc:
            raise CommandError(str(exc)) from None
        except SyntaxError as exc:
            raise CommandError(f"invalid condition {condition!r}: {exc.msg}") from None
        modules = sorted(bp.labels.values())
        shown = ", ".join(modules[:4]) + (f", ... ({len(modules)} modules)" if len(modules) > 4 else "")
        if not modules:
            shown = _pending_text(pattern, roots, bp.near)
        extra = "".join([f" if {condition}" if condition else "", f", after {after}" if after else "",
                         ", once" if once else ""])
        from ..render.table import wrap_lines
        self.message(wrap_lines(f"module breakpoint {bp.number}: {pattern}{extra} -> {shown}", self.out_width()))
        warning = compiled_warning(pattern, roots, bp.aliases) if modules else None
        if warning:
            self.message(self.out_style().warn(wrap_lines(f"  {warning}", self.out_width())))

    do_bm = do_break_module

    def do_break(self, arg, temporary=False):
        """b(reak) [ ([filename:]lineno | function) [, condition] ]
        pdb's break; without an argument it lists pdb's breakpoints, then the module breakpoints
        (break-module) with their hit counts."""
        from ..forward.breakpoints import module_breakpoints
        from ..render.modules import render_module_breakpoints
        result = super().do_break(arg, temporary)
        if not (arg or "").strip():
            try:
                bps = module_breakpoints().breakpoints()
                if bps:
                    self.message(render_module_breakpoints(bps, width=self.out_width(), style=self.out_style()))
            except Exception as exc:  # pdb's own listing is already printed; never lose the prompt
                self.error(f"break: cannot list module breakpoints: {type(exc).__name__}: {exc}")
        return result

    do_b = do_break

    @command
    def do_clear_module(self, arg):
        """clear-module N|all
        Remove module breakpoint N, or all of them (break-module lists the numbers); their hooks go
        with them.
        Example: clear-module 1"""
        from ..forward.breakpoints import module_breakpoints
        args = parse_args(arg, self.do_clear_module).words
        if len(args) != 1:
            raise CommandError("usage: clear-module N|all")
        engine = module_breakpoints()
        if args[0] == "all":
            count = engine.clear()
            self.message(f"cleared {plural(count, 'module breakpoint')}")
            return
        try:
            number = int(args[0])
        except ValueError:
            raise CommandError(f"not a breakpoint number: {args[0]!r} (usage: clear-module N|all)") from None
        try:
            bp = engine.remove(number)
        except KeyError:
            have = ", ".join(str(b.number) for b in engine.breakpoints()) or "none"
            raise CommandError(f"no module breakpoint {number} (have: {have})") from None
        self.message(f"cleared module breakpoint {bp.number}: {bp.pattern}")

    @command
    def do_where_forward(self, arg):
        """where-forward [EXPR] [--edit]
        The file and def line of the forward that actually runs for a module: EXPR (default: the module
        of the current frame, else the root model), through torch.compile's _orig_mod, DDP's module,
        PEFT's base_model.model, an instance-level forward and decorators (deprecate_kwarg,
        can_return_tuple...). --edit adds a shell command that opens the file there ($EDITOR +LINE FILE).
        Alias: wf.
        Example: wf model.model.layers[0].self_attn --edit"""
        from ..inspect.forward_location import forward_location
        from ..inspect.modules import is_module
        from ..render.modules import render_forward_location
        args = parse_args(arg, self.do_where_forward, flags={"--edit"})
        edit, expr = args.flag("--edit"), args.rest
        if expr:
            target = self.eval_in_frame(expr)
        else:
            target = self.frame_locals().get("self")
            if not is_module(target):
                roots, _ = self._nav_roots()
                if not roots:
                    raise CommandError("no module here: give one, e.g. where-forward model.model.layers[0]")
                target = roots[0]
        try:
            location = forward_location(target)
        except TypeError as exc:
            raise CommandError(str(exc)) from None
        from ..render.table import wrap_lines
        text = render_forward_location(location, edit=edit, style=self.out_style())
        head, _, command_line = text.rpartition("\n") if edit else (text, "", "")
        wrapped = wrap_lines(head, self.out_width())  # the --edit shell command stays one line (to copy)
        self.message(f"{wrapped}\n{command_line}" if edit and head else wrapped if not edit else text)

    do_wf = do_where_forward
