"""Where a local tensor came from, read from the function's source: the module whose output it is.

Usage::

    tree = function_ast(frame.f_code)                   # (module tree, FunctionDef) or None
    value = static_value(node, frame_locals(frame), frame.f_globals)   # MISSING when it would run code
    prov = provenance(tree[1], "query_states", before=42, frame=frame)
    # Provenance(module_path='model.layers.0.self_attn.q_proj', module_class='Linear',
    #            steps=('view', 'transpose', 'apply_rotary_pos_emb'), origin='self.q_proj(hidden_states)')

The source comes from ``linecache`` (the file as the import system loaded it); nothing of the user's runs.
``static_value`` reads names from the frame, attributes as stored (a module's ``_modules``/``_parameters``,
an instance dict; never a property), constant subscripts of tuples, lists and dicts, a tensor's ``.shape``
(metadata), and integer arithmetic. ``provenance`` walks the function's assignments backwards from a line:
tensor methods (``.view``, ``.transpose``...) and plain functions that take the name and give it back
(``apply_rotary_pos_emb``, ``cache.update``) become steps; a call of ``self.<attr>`` that is a submodule
ends the walk with that module's qualified name from the root model on the stack. An assignment inside an
``if``/loop/``try`` that does not also hold the line may not have run: its step is marked ``?``.
"""

from __future__ import annotations

import ast
import linecache
import operator
import types
from dataclasses import dataclass

from .frames import frame_locals
from .kinds import MISSING, instance_dict, is_module, module_attr, sequence_items, stored
from .modules import frame_stack, model_names, module_frames
from .safe import is_tensor, no_torch_function

__all__ = ["Provenance", "function_ast", "static_value", "provenance", "module_path", "dotted", "TENSOR_STEPS"]

# Methods that keep "the same tensor" for provenance: a chain of them leads back to the producer.
TENSOR_STEPS = frozenset({
    "view", "reshape", "transpose", "permute", "contiguous", "unsqueeze", "squeeze", "flatten", "expand",
    "to", "float", "half", "bfloat16", "type_as", "clone", "detach", "chunk", "split", "unflatten",
    "repeat", "repeat_interleave", "narrow", "softmax", "masked_fill", "relu", "gelu", "silu", "sigmoid", "tanh",
})
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv}
_OP_TEXT = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.MatMult: "@", ast.FloorDiv: "//",
            ast.Pow: "**", ast.Mod: "%"}
_CONDITIONAL = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.With, ast.AsyncWith, ast.IfExp)
_TREES: dict[tuple[str, int], ast.Module | None] = {}


@dataclass(frozen=True)
class Provenance:
    """Where a name's value came from: the producing module (if one), the steps after it, the origin text."""

    origin: str                         # "self.q_proj(hidden_states)", "argument of forward", "?"
    steps: tuple[str, ...] = ()         # applied after the origin, in order; "name?" when maybe not run
    module_path: str | None = None      # "model.layers.0.self_attn.q_proj" (or "self.q_proj" off the tree)
    module_class: str | None = None
    lineno: int | None = None           # the line of the origin


def _tree(filename: str, lines: list[str]) -> ast.Module | None:
    key = (filename, hash("".join(lines)))
    if key not in _TREES:
        try:
            _TREES[key] = ast.parse("".join(lines))
        except (SyntaxError, ValueError):
            _TREES[key] = None
    return _TREES[key]


def function_ast(code, lineno: int | None = None) -> tuple[ast.Module, ast.AST] | None:
    """Usage: ``function_ast(frame.f_code, frame.f_lineno)``; the parsed file and the innermost function
    of that name holding ``lineno`` (else the innermost function holding it, else the module), or None
    when there is no source or it does not parse."""
    lines = linecache.getlines(code.co_filename)
    if not lines:
        return None
    tree = _tree(code.co_filename, lines)
    if tree is None:
        return None
    line = lineno or code.co_firstlineno
    if code.co_name == "<module>":
        return tree, tree
    best = enclosing = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            if not start <= line <= node.end_lineno:
                continue
            if getattr(node, "name", "<lambda>") == code.co_name and (best is None or node.lineno >= best.lineno):
                best = node
            if enclosing is None or node.lineno >= enclosing.lineno:
                enclosing = node
    # a comprehension's own code (3.11: <listcomp>, <genexpr>) runs inside the function that holds it
    return tree, best or enclosing or tree


def dotted(node: ast.AST) -> str:
    """Usage: ``dotted(call.func)`` -> ``"torch.nn.functional.linear"``; the source text of an expression."""
    try:
        return ast.unparse(node)
    except Exception:  # an odd node: its type name is all we can say
        return type(node).__name__


def _attr(obj, name: str):
    if is_tensor(obj):
        if name in ("shape",):
            try:
                with no_torch_function():
                    return tuple(int(s) for s in obj.shape)
            except Exception:  # symbolic shape: unknown
                return MISSING
        return MISSING
    if is_module(obj):
        return module_attr(obj, name, MISSING)
    if issubclass(type(obj), types.ModuleType):  # a Python module: its dict holds functions, no descriptors run
        return instance_dict(obj).get(name, MISSING)
    return stored(obj, name, MISSING)


def _index(container, key):
    items = sequence_items(container)
    if items is not None:
        if isinstance(key, int):
            return items[key] if -len(items) <= key < len(items) else MISSING
        if isinstance(key, slice):
            return tuple(items[key])
        return MISSING
    if issubclass(type(container), dict):
        try:
            return dict.get(container, key, MISSING)
        except TypeError:  # an unhashable key
            return MISSING
    return MISSING


def static_value(node: ast.AST, local_map: dict, global_map: dict | None = None):
    """Usage: ``static_value(ast.parse("self.head_dim", mode="eval").body, locals)`` -> 16, or MISSING."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in local_map:
            return local_map[node.id]
        return (global_map or {}).get(node.id, MISSING)
    if isinstance(node, ast.Attribute):
        base = static_value(node.value, local_map, global_map)
        return MISSING if base is MISSING else _attr(base, node.attr)
    if isinstance(node, ast.Subscript):
        base = static_value(node.value, local_map, global_map)
        key = _slice_value(node.slice, local_map, global_map)
        return MISSING if base is MISSING or key is MISSING else _index(base, key)
    if isinstance(node, (ast.Tuple, ast.List)):
        out = []
        for elt in node.elts:
            if isinstance(elt, ast.Starred):
                inner = static_value(elt.value, local_map, global_map)
                items = sequence_items(inner) if inner is not MISSING else None
                if items is None:
                    return MISSING
                out.extend(items)
            else:
                value = static_value(elt, local_map, global_map)
                if value is MISSING:
                    return MISSING
                out.append(value)
        return tuple(out)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = static_value(node.operand, local_map, global_map)
        return -value if type(value) is int else MISSING
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        a, b = static_value(node.left, local_map, global_map), static_value(node.right, local_map, global_map)
        if type(a) is int and type(b) is int and not (isinstance(node.op, ast.FloorDiv) and b == 0):
            return _BINOPS[type(node.op)](a, b)
    return MISSING


def _slice_value(node, local_map, global_map):
    if isinstance(node, ast.Slice):
        parts = [None if p is None else static_value(p, local_map, global_map)
                 for p in (node.lower, node.upper, node.step)]
        if any(p is MISSING or not (p is None or type(p) is int) for p in parts):
            return MISSING
        return slice(*parts)
    value = static_value(node, local_map, global_map)
    return value if type(value) in (int, str) else MISSING


def module_path(frame, module) -> str | None:
    """Usage: ``module_path(frame, self.q_proj)`` -> ``"model.layers.0.self_attn.q_proj"``; the module's name
    from the outermost model running on ``frame``'s stack, None when it is not in that tree."""
    rows = module_frames(frame_stack(frame))
    if not rows:
        return None
    root = rows[0].module
    names = model_names(root).names_of(module)
    if not names:
        return None
    return names[0] or "(root)"


def _targets(node: ast.AST) -> list[list[str | None]]:
    """Each target of an assignment statement as a list of names (None for non-name elements)."""
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
        targets = [node.target]
    else:
        return []
    out = []
    for target in targets:
        if isinstance(target, (ast.Tuple, ast.List)):
            out.append([e.id if isinstance(e, ast.Name) else None for e in target.elts])
        else:
            out.append([target.id if isinstance(target, ast.Name) else None])
    return out


def _walk_body(func: ast.AST, parents: tuple = ()):
    """Statements of ``func`` with their enclosing compound statements; nested functions are not entered."""
    for child in ast.iter_child_nodes(func):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield child, parents
        yield from _walk_body(child, parents + (child,) if isinstance(child, _CONDITIONAL) else parents)


def _contains(node: ast.AST, lineno: int) -> bool:
    return node.lineno <= lineno <= (node.end_lineno or node.lineno)


def _is_none_test(test: ast.AST) -> tuple[str, bool] | None:
    """``x is None`` -> ("x", True); ``x is not None`` -> ("x", False); anything else None."""
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name)
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None
            and isinstance(test.ops[0], (ast.Is, ast.IsNot))):
        return test.left.id, isinstance(test.ops[0], ast.Is)
    return None


def _branch_ran(func, parent: ast.AST, node: ast.AST, before: int, local_map: dict) -> bool | None:
    """Whether ``node`` under ``if x is (not) None`` ran, from ``x`` now; None when that cannot be told
    (another condition, or ``x`` assigned again after the ``if``)."""
    found = _is_none_test(parent.test) if isinstance(parent, ast.If) else None
    if found is None or found[0] not in local_map:
        return None
    name, wants_none = found
    later = _last_assignment(func, name, before, {})
    if later is not None and later[0].lineno > parent.lineno:
        return None
    holds = (local_map[name] is None) == wants_none
    in_body = any(stmt.lineno <= node.lineno <= stmt.end_lineno for stmt in parent.body)
    return holds if in_body else not holds


def _last_assignment(func, name: str, before: int, local_map: dict):
    best = None
    for node, parents in _walk_body(func):
        if not isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) or node.lineno >= before:
            continue
        for names in _targets(node):
            if name not in names or (best is not None and node.lineno <= best[0].lineno):
                continue
            ran = [_branch_ran(func, p, node, before, local_map) for p in parents if not _contains(p, before)]
            if False in ran:
                continue
            best = (node, names.index(name) if len(names) > 1 else None, None in ran)
    return best


def _params(func) -> list[str]:
    args = getattr(func, "args", None)
    if args is None:
        return []
    every = args.posonlyargs + args.args + args.kwonlyargs
    every += [a for a in (args.vararg, args.kwarg) if a is not None]
    return [a.arg for a in every]


def _unwrap_methods(value: ast.AST) -> tuple[list[str], ast.AST]:
    chain = []
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in TENSOR_STEPS:
        chain.append(value.func.attr)
        value = value.func.value
    while isinstance(value, ast.Subscript):  # q, k, v = x.chunk(3)[...] / x[..., :d]
        chain.append("[…]")
        value = value.value
        while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in TENSOR_STEPS:
            chain.append(value.func.attr)
            value = value.func.value
    return chain[::-1], value


def _flat_args(call: ast.Call) -> list[ast.AST]:
    """Positional arguments, the elements of a list/tuple argument included (``torch.cat([y, extra])``)."""
    out = []
    for arg in call.args:
        out.extend(arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [arg])
    return out


def _called_module(call: ast.Call, local_map: dict, global_map: dict):
    """The nn.Module a call runs (``self.q_proj(...)``, ``layer(...)``), read as stored; None otherwise.

    A module called by a bare name with no parameter, buffer or child is a function in a module's clothes
    (transformers 5.25 wraps ``apply_rotary_pos_emb`` in a ``Func`` module for hub kernels): a step, as the
    function was, so the walk goes on to the projection before it."""
    if not isinstance(call.func, (ast.Name, ast.Attribute)):
        return None
    value = static_value(call.func, local_map, global_map)
    if not is_module(value):
        return None
    if isinstance(call.func, ast.Name) and _stateless(value):
        return None
    return value


def _stateless(module) -> bool:
    own = instance_dict(module)
    return not any(own.get(key) for key in ("_parameters", "_buffers", "_modules"))


def provenance(func, name: str, before: int, frame, max_steps: int = 12) -> Provenance:
    """Usage: ``provenance(func_node, "key_states", before=lineno, frame=frame)``; see the module docstring."""
    steps: list[str] = []
    line = before
    local_map = frame_locals(frame)
    for _ in range(max_steps):
        found = _last_assignment(func, name, line, local_map)
        if found is None:
            origin = f"argument {name} of {getattr(func, 'name', '?')}" if name in _params(func) else f"{name} (?)"
            return Provenance(origin, tuple(steps))
        node, index, maybe = found
        mark = "?" if maybe else ""
        if isinstance(node, ast.AugAssign):
            steps.insert(0, f"{_OP_TEXT.get(type(node.op), '?')}= {dotted(node.value)}{mark}")
            line = node.lineno
            continue
        chain, base = _unwrap_methods(node.value)
        steps[:0] = [step + mark for step in chain]
        if isinstance(base, ast.Call):
            sub = _called_module(base, local_map, frame.f_globals)
            if sub is not None:
                path = (module_path(frame, sub) or dotted(base.func)) + mark
                return Provenance(dotted(base), tuple(steps), path, type(sub).__name__, node.lineno)
            arg_names = [a.id for a in _flat_args(base) if isinstance(a, ast.Name)]
            callee = dotted(base.func)
            if name in arg_names:
                nxt = name
            elif index is not None and index < len(arg_names):
                nxt = arg_names[index]
            elif len(arg_names) == 1:
                nxt = arg_names[0]
            else:
                return Provenance(dotted(base), tuple(steps), lineno=node.lineno)
            steps.insert(0, callee + mark)
            name, line = nxt, node.lineno
            continue
        if isinstance(base, ast.BinOp) and index is None and not chain:  # y = y * scale: a step on y
            for side, other in ((base.left, base.right), (base.right, base.left)):
                if isinstance(side, ast.Name) and side.id == name:
                    steps.insert(0, f"{_OP_TEXT.get(type(base.op), '?')} {dotted(other)}{mark}")
                    line = node.lineno
                    break
            else:
                return Provenance(dotted(base), tuple(steps), lineno=node.lineno)
            continue
        if isinstance(base, ast.Name) and (index is None or chain):  # a, b = y.chunk(2): both from y
            name, line = base.id, node.lineno
            continue
        return Provenance(dotted(base), tuple(steps), lineno=node.lineno)
    return Provenance(f"{name} (?)", tuple(steps))
