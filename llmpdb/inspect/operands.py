"""The operands of one expression: what operation it is, each operand's shape, dim names and provenance.

Usage::

    op = classify(call_node, frame)        # Operation("matmul", [left, right]) / ("cat", [...], dim=2) ...
    operand = resolve_operand(node, frame, func, before=lineno, namer=namer)
    # Operand(text='key_states.transpose(2, 3)', shape=(1, 2, 16, 7), dims=('batch', 'kv_heads', 'head_dim',
    #         'seq'), kind='Tensor f32', provenance=Provenance(...))

No operand is evaluated: names and attributes are read as stored (``provenance.static_value``), and a
chain of tensor methods on one (``k.transpose(2, 3)``, ``x.view(b, s, -1, d)``, ``w.T``) has its shape
computed from the receiver's (``shape_ops.apply_method``); dimension names follow a permutation and are
named afresh by size after a reshape.
"""

from __future__ import annotations

import ast
import types
from dataclasses import dataclass, field

from .frames import frame_locals
from .kinds import MISSING, is_module, module_attr, sequence_items
from .layer_calls import torch_callable
from .provenance import Provenance, dotted, module_path, provenance, static_value
from .safe import is_tensor, no_torch_function, short_dtype, type_name
from .shape_ops import SAME_SHAPE, SHAPE_METHODS, apply_method, permute_of

__all__ = ["Operand", "Operation", "classify", "resolve_operand", "module_operand", "index_keys"]

_MATMUL = {"matmul", "bmm", "mm", "mv"}
_CAT = {"cat", "concat", "concatenate", "stack", "hstack", "vstack"}
_ELEMENTWISE = {"add", "sub", "mul", "div", "where", "maximum", "minimum", "eq", "ne", "lt", "gt", "masked_fill",
                "true_divide", "pow", "logical_and", "logical_or", "addcmul"}
_BINOP_NAMES = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
                ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|"}
_COMPARE_NAMES = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}


@dataclass(frozen=True)
class Operand:
    """One operand: its source text, shape (None: not a tensor or unknown), dim names, what it is, where
    it came from."""

    text: str
    shape: tuple[int, ...] | None
    dims: tuple[str, ...] | None
    kind: str
    provenance: Provenance | None = None


@dataclass
class Operation:
    """What the expression does: ``kind`` is matmul / elementwise / cat / view / linear / embedding / sdpa /
    einsum / module / call."""

    kind: str
    label: str
    operands: list[ast.AST]
    dim: object = None                 # cat: the dim; sdpa: the enable_gqa node; einsum: the equation
    shape_args: list[ast.AST] = field(default_factory=list)
    module: object = None              # module: the nn.Module called (self.fc2)
    module_text: str = ""


def _name_of(func: ast.AST) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def _kw(call: ast.Call, name: str):
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def _is_receiver(node: ast.AST, frame) -> bool:
    """``x.view(...)`` on a tensor (or an expression not read), not ``torch.cat`` on the torch module."""
    value = static_value(node, frame_locals(frame), frame.f_globals)
    return not issubclass(type(value), types.ModuleType) and not is_module(value)


def _sdpa(call: ast.Call) -> Operation:
    """``F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=...)``: q, k, v and the mask."""
    nodes = [_kw(call, kw) or (call.args[i] if i < len(call.args) else None)
             for i, kw in enumerate(("query", "key", "value", "attn_mask"))]
    if any(n is None or isinstance(n, ast.Starred) for n in nodes[:3]):
        return Operation("call", dotted(call.func), [n for n in nodes if n is not None])
    mask = nodes[3]
    no_mask = mask is None or (isinstance(mask, ast.Constant) and mask.value is None) or isinstance(mask, ast.Starred)
    return Operation("sdpa", "scaled_dot_product_attention", nodes[:3] + ([] if no_mask else [mask]),
                     dim=_kw(call, "enable_gqa"))


def classify(node: ast.AST, frame) -> Operation | None:
    """Usage: ``classify(ast_node, frame)``; None for an expression that is no operation (a bare name)."""
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.MatMult):
            return Operation("matmul", "matmul (@)", [node.left, node.right])
        return Operation("elementwise", f"elementwise {_BINOP_NAMES.get(type(node.op), '?')}", [node.left, node.right])
    if isinstance(node, ast.Compare) and len(node.comparators) == 1:
        op = _COMPARE_NAMES.get(type(node.ops[0]))
        return Operation("elementwise", f"elementwise {op}", [node.left, node.comparators[0]]) if op else None
    if not isinstance(node, ast.Call):
        return None
    name = _name_of(node.func)
    method_on = node.func.value if isinstance(node.func, ast.Attribute) and _is_receiver(node.func.value, frame) \
        else None
    args = [a for a in node.args if not isinstance(a, ast.Starred)]
    if method_on is not None and name in ("view", "reshape"):
        return Operation("view", name, [method_on], shape_args=list(node.args))
    callee = static_value(node.func, frame_locals(frame), frame.f_globals) if isinstance(
        node.func, (ast.Name, ast.Attribute)) else MISSING
    if is_module(callee):
        return Operation("module", f"{type_name(callee)} call", args[:1], module=callee, module_text=dotted(node.func))
    operands = ([method_on] if method_on is not None else []) + args
    if callee is not MISSING and not torch_callable(callee):  # a user's function named matmul/add/linear
        return Operation("call", dotted(node.func), operands)
    if name in ("linear", "embedding") and callee is not MISSING:  # F.linear(x, w) / F.embedding(ids, w)
        return Operation(name, name, operands[:2])
    if name == "scaled_dot_product_attention" and callee is not MISSING:
        return _sdpa(node)
    starred = any(isinstance(a, ast.Starred) for a in node.args)
    if name == "einsum" and callee is not MISSING and node.args and not starred:
        return Operation("einsum", "einsum", list(node.args[1:]), dim=node.args[0])
    if name in _MATMUL:
        return Operation("matmul", name, operands[:2])
    if name in _CAT and args and isinstance(args[0], (ast.List, ast.Tuple)):
        dim = _kw(node, "dim") or (node.args[1] if len(node.args) > 1 else None)
        return Operation("cat", name, list(args[0].elts), dim=dim)
    if name in _ELEMENTWISE:
        return Operation("elementwise", name, operands)
    return Operation("call", dotted(node.func), operands)


def _tensor_shape(value) -> tuple[int, ...] | None:
    try:
        with no_torch_function():
            return tuple(int(s) for s in value.shape)
    except Exception:  # symbolic or nested: no concrete shape
        return None


def _kind(value) -> str:
    if is_tensor(value):
        try:
            dtype = short_dtype(value.dtype)
        except Exception:  # an unreadable dtype
            dtype = "?"
        return f"{type_name(value)} {dtype}"
    return type_name(value)


def index_keys(node: ast.AST, local_map, global_map) -> tuple | None:
    """``x[0, :2, None, ...]``'s keys as ints, slices, None and Ellipsis; None for anything else."""
    parts = node.elts if isinstance(node, ast.Tuple) else [node]
    keys = []
    for part in parts:
        if isinstance(part, ast.Slice):
            bounds = [None if b is None else static_value(b, local_map, global_map)
                      for b in (part.lower, part.upper, part.step)]
            if not all(b is None or type(b) is int for b in bounds):
                return None
            keys.append(slice(*bounds))
            continue
        value = static_value(part, local_map, global_map)
        if value is None or value is Ellipsis or type(value) is int:
            keys.append(value)
        else:
            return None
    return tuple(keys)


def _walk_chain(node: ast.AST, frame):
    """(base node, base value, [(method, args)]) for a chain of shape methods on a value read as stored."""
    local_map, global_map = frame_locals(frame), frame.f_globals
    chain = []
    while True:
        value = static_value(node, local_map, global_map)
        if value is not MISSING:
            return node, value, chain[::-1]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in SAME_SHAPE | SHAPE_METHODS:
            args = []
            for arg in node.args:
                if isinstance(arg, ast.Starred):
                    items = sequence_items(static_value(arg.value, local_map, global_map))
                    args.extend(items if items is not None else [MISSING])
                else:
                    args.append(static_value(arg, local_map, global_map))
            chain.append((node.func.attr, tuple(args)))
            node = node.func.value
        elif isinstance(node, ast.Subscript) and index_keys(node.slice, local_map, global_map) is not None:
            chain.append(("[]", index_keys(node.slice, local_map, global_map)))
            node = node.value
        elif isinstance(node, ast.Attribute) and node.attr in ("T", "mT"):
            chain.append((node.attr, ()))
            node = node.value
        else:
            return node, MISSING, chain[::-1]


def _origin(base: ast.AST, func, before: int, frame) -> Provenance | None:
    if isinstance(base, ast.Name) and func is not None:
        return provenance(func, base.id, before, frame)
    if isinstance(base, ast.Attribute):
        owner = static_value(base.value, frame_locals(frame), frame.f_globals)
        if is_module(owner):
            path = module_path(frame, owner)
            where = f"{path}.{base.attr}" if path and path != "(root)" else dotted(base)
            return Provenance(f"{base.attr} of {type_name(owner)}", (), where, type_name(owner))
    return None


def resolve_operand(node: ast.AST, frame, func, *, before: int, namer=None) -> Operand:
    """Usage: ``resolve_operand(node, frame, func_ast, before=lineno, namer=DimNamer...)``; see the docstring."""
    text = dotted(node)
    base, value, chain = _walk_chain(node, frame)
    if value is MISSING:
        undefined = isinstance(base, ast.Name) and base.id not in frame_locals(frame) and base.id not in frame.f_globals
        return Operand(text, None, None, "not defined here" if undefined else "not read (would run code)", None)
    if not is_tensor(value):
        return Operand(text, None, None, _kind(value), None)
    shape = _tensor_shape(value)
    dims = namer.name_dims(shape, path=dotted(base)) if namer is not None and shape is not None else None
    dims = list(dims) if dims else None
    for method, args in chain:
        if shape is None or any(a is MISSING for a in args):
            shape = dims = None
            break
        order = permute_of(method, args, len(shape))
        new_shape = apply_method(shape, method, args)
        if dims is not None and order is not None:
            dims = [dims[i] for i in order]
        elif method not in SAME_SHAPE:
            dims = None
        shape = new_shape
        if shape is not None and dims is None and namer is not None:
            found = namer.name_dims(shape)
            dims = list(found) if found else None
    kind = _kind(value)
    return Operand(text, shape, tuple(dims) if dims else None, kind, _origin(base, func, before, frame))


def module_operand(module, text: str, frame) -> Operand | None:
    """The weight of a called module (``self.fc2`` -> ``self.fc2.weight``), with the module's name."""
    weight = module_attr(module, "weight", None)
    if not is_tensor(weight):
        return None
    path = module_path(frame, module) or text
    prov = Provenance(f"weight of {type_name(module)}", (), path, type_name(module))
    return Operand(f"{text}.weight", _tensor_shape(weight), None, _kind(weight), prov)
