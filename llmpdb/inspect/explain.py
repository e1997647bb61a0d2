"""Explain a failing tensor expression: each operand's shape, the module that produced it, the mismatch.

Usage::

    report = explain_traceback(exc.__traceback__, exc)   # the innermost frame of user/model code
    report.operands[0]    # Operand('query_states', (1, 4, 7, 16), ('batch', 'heads', 'seq', 'head_dim'), ...)
    report.diagnosis      # 'dim 1: 4 heads vs 2 kv_heads (batch dims broadcast (aligned from the right))'
    report.hint           # 'GQA not expanded: repeat_kv missing?'
    report = explain_expression(frame, "query_states @ key_states.transpose(2, 3)")   # at any stop

Pure inspection, nothing of the user's runs: the failing expression is found from the code position of
the instruction that raised (``co_positions`` at the traceback's ``tb_lasti``, what ``traceback`` draws
its ``^^^^`` carets from) in the function's source parsed with ``ast``; frames of torch, the standard
library and llmpdb are skipped (a ``Linear`` mismatch is explained at the user's ``self.fc2(h)``, with a
note where torch raised). Operands are read as stored (``inspect.operands``), their producers found by
walking the function's assignments backwards (``inspect.provenance``), and the mismatch computed for
matmul, broadcasting ops, cat, view/reshape (``inspect.shape_ops``), layers told by their class
(``inspect.layer_calls``), attention and einsum (``inspect.contraction_ops``) and failed subscripts
(``inspect.lookups``); an exception with nothing to explain has its chain followed (``raise ... from e``).
Dimension names come
from ``DimNamer`` (``?`` where unsure); heads against kv heads says GQA was not expanded.
"""

from __future__ import annotations

import ast
import itertools
import os
import sys
import sysconfig
from dataclasses import dataclass, replace

from .dims import DimNamer
from .frames import frame_locals
from .kinds import MISSING, sequence_items
from .operands import Operand, Operation, classify, index_keys, module_operand, resolve_operand
from .provenance import dotted, function_ast, static_value
from .safe import is_tensor
from .contraction_ops import einsum_mismatch, sdpa_mismatch
from .layer_calls import layer_diagnosis, layer_kind
from .lookups import lookup_diagnosis
from .shape_ops import Mismatch, broadcast_mismatch, cat_mismatch, matmul_mismatch, view_mismatch

__all__ = ["Explanation", "explain_traceback", "explain_expression", "traceback_frames", "is_internal"]

_LLMPDB_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_GQA_HINT = "GQA not expanded: repeat_kv missing?"


@dataclass(frozen=True)
class Explanation:
    """What ``explain`` found. ``problem`` (one line) is set when there is nothing more to say."""

    expression: str
    filename: str
    lineno: int
    function: str
    op: str | None = None
    exception: str | None = None
    operands: tuple[Operand, ...] = ()
    diagnosis: str | None = None
    hint: str | None = None
    notes: tuple[str, ...] = ()
    problem: str | None = None
    label: str = "mismatch"            # what the diagnosis line is called: "lookup" for a failed subscript
    chained: str | None = None         # "explaining the cause: RuntimeError: ..." (``raise ... from e``)

    @property
    def location(self) -> str:
        return f"{os.path.basename(self.filename)}:{self.lineno} in {self.function}"


def _torch_dir() -> str | None:
    torch = sys.modules.get("torch")
    path = getattr(torch, "__file__", None) if torch is not None else None
    return os.path.dirname(os.path.abspath(path)) + os.sep if isinstance(path, str) else None


def is_internal(filename: str) -> bool:
    """Usage: ``is_internal(frame.f_code.co_filename)``; True for torch, the standard library (frozen
    modules included), llmpdb. Code made by ``exec``/``compile`` (``<string>``, a notebook cell) is not:
    it is the user's, explained from ``linecache`` or said to have no source."""
    if filename.startswith("<"):
        return filename.startswith("<frozen ")
    path = os.path.abspath(filename)
    torch_dir = _torch_dir()
    if (torch_dir and path.startswith(torch_dir)) or path.startswith(_LLMPDB_DIR):
        return True
    stdlib = os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep
    return path.startswith(stdlib) and "site-packages" not in path


def traceback_frames(tb) -> list[tuple[object, int]]:
    """Usage: ``traceback_frames(exc.__traceback__)`` -> ``[(frame, tb_lasti), ...]`` outermost first."""
    out = []
    while tb is not None:
        out.append((tb.tb_frame, tb.tb_lasti))
        tb = tb.tb_next
    return out


def _position(code, lasti: int):
    try:
        return next(itertools.islice(code.co_positions(), lasti // 2, None))
    except (StopIteration, AttributeError):  # no positions (-X no_debug_ranges) or an odd offset
        return None


def _span(node: ast.AST):
    return (getattr(node, "lineno", None), getattr(node, "end_lineno", None),
            getattr(node, "col_offset", None), getattr(node, "end_col_offset", None))


def _encloses(node: ast.AST, pos) -> bool:
    line, end_line, col, end_col = _span(node)
    if None in (line, end_line, col, end_col):
        return False
    return (line, col) <= (pos[0], pos[2]) and (end_line, end_col) >= (pos[1], pos[3])


def _failing_node(func: ast.AST, pos) -> ast.AST | None:
    """The expression whose span is exactly ``pos`` (a Call or an operator before a subscript before any
    other), else the smallest Call/BinOp enclosing it."""
    exact, best = [], None
    for node in ast.walk(func):
        if not isinstance(node, ast.expr) or not _encloses(node, pos):
            continue
        if _span(node) == tuple(pos):
            exact.append(node)
        elif isinstance(node, (ast.Call, ast.BinOp, ast.Compare)):
            size = (node.end_lineno - node.lineno, node.end_col_offset - node.col_offset)
            if best is None or size < best[0]:
                best = (size, node)
    for kinds in ((ast.Call, ast.BinOp, ast.Compare), (ast.Subscript,), (ast.expr,)):
        found = [n for n in exact if isinstance(n, kinds)]
        if found:
            return found[0]
    return best[1] if best else None


def _label(operand: Operand, dim: int, size: int) -> str:
    name = operand.dims[dim] if operand.dims and dim < len(operand.dims) else None
    return f"{size} {name}" if name and name not in ("?", "1") else f"{size}"


def _describe(m: Mismatch, operands: list[Operand], named: bool = False) -> str:
    a, b = operands[m.a], operands[m.b]
    la, lb = _label(a, m.dim_a, m.size_a), _label(b, m.dim_b, m.size_b)
    if not named and len(operands) == 2 and m.dim_a == m.dim_b and len(a.shape) == len(b.shape):
        return f"dim {m.dim_a}: {la} vs {lb} ({m.rule})"
    return f"{a.text} dim {m.dim_a} ({la}) vs {b.text} dim {m.dim_b} ({lb}) ({m.rule})"


def _gqa(m: Mismatch, operands: list[Operand], namer: DimNamer | None) -> bool:
    names = set()
    for operand, dim in ((operands[m.a], m.dim_a), (operands[m.b], m.dim_b)):
        if operand.dims and dim < len(operand.dims):
            names.add(operand.dims[dim])
    if names == {"heads", "kv_heads"}:
        return True
    if namer is None or not names & {"heads", "kv_heads"}:
        return False
    return {m.size_a, m.size_b} == {namer.size_of("heads"), namer.size_of("kv_heads")}


def _int_items(value) -> list[int] | None:
    items = sequence_items(value) if value is not MISSING else None
    if items is None or not all(type(v) is int for v in items):
        return None
    return list(items)


def _view_target(op: Operation, frame) -> tuple[int, ...] | None:
    local_map, global_map = frame_locals(frame), frame.f_globals
    values: list[int] = []
    for node in op.shape_args:
        inner = node.value if isinstance(node, ast.Starred) else node
        value = static_value(inner, local_map, global_map)
        if type(value) is int and not isinstance(node, ast.Starred):
            values.append(value)
            continue
        items = _int_items(value)
        if items is None or (not isinstance(node, ast.Starred) and len(op.shape_args) != 1):
            return None
        values.extend(items)
    return tuple(values)


def _layer(op: Operation, operands: list[Operand], exc) -> tuple[str | None, str | None]:
    """A called layer (or ``F.linear`` / ``F.embedding``), by its class: nothing for a class not known."""
    kind = layer_kind(op.module) if op.kind == "module" else op.kind
    if kind is None or len(operands) != 2:
        return None, None
    owner = operands[1].provenance.module_path if op.kind == "module" and operands[1].provenance else None
    found, hint = layer_diagnosis(kind, op.module, owner, operands, exc)
    return (_describe(found, operands) if isinstance(found, Mismatch) else found), hint


def _diagnose(op: Operation, operands: list[Operand], frame, namer, exc) -> tuple[str | None, str | None]:
    if op.kind in ("linear", "embedding", "module"):
        return _layer(op, operands, exc)
    if op.kind == "sdpa" and len(operands) == 4 and operands[3].kind == "NoneType":
        operands = operands[:3]  # attn_mask=mask where mask is None: no mask
    shapes = [o.shape for o in operands]
    known = [s for s in shapes if s is not None]
    if len(known) != len(shapes) or not shapes:
        return None, None
    found: Mismatch | str | None = None
    if op.kind == "matmul" and len(shapes) == 2:
        found = matmul_mismatch(*shapes)
    elif op.kind == "elementwise":
        found = broadcast_mismatch(shapes)
    elif op.kind == "cat":
        dim = static_value(op.dim, frame_locals(frame), frame.f_globals) if op.dim is not None else 0
        found = cat_mismatch(shapes, dim) if type(dim) is int else None
    elif op.kind == "sdpa" and len(shapes) >= 3:
        gqa = op.dim is not None and static_value(op.dim, frame_locals(frame), frame.f_globals) is True
        found = sdpa_mismatch(*shapes[:3], shapes[3] if len(shapes) > 3 else None, gqa=gqa)
    elif op.kind == "einsum":
        equation = static_value(op.dim, frame_locals(frame), frame.f_globals)
        found = einsum_mismatch(equation, shapes, [o.text for o in operands]) if type(equation) is str else None
    elif op.kind == "view":
        new = _view_target(op, frame)
        found = view_mismatch(shapes[0], new) if new is not None else None
        return (f"{operands[0].text} {shapes[0]}: {found}" if found else None), None
    if isinstance(found, str):
        return found, None
    if found is None:
        return None, None
    named = op.kind in ("sdpa", "einsum")  # operands are told apart by name, not by a shared dim
    return _describe(found, operands, named), (_GQA_HINT if _gqa(found, operands, namer) else None)


def _namer(frame):
    try:
        return DimNamer.from_frame(frame_locals(frame), frame=frame)
    except Exception:  # sizes are a bonus: an odd config leaves the dims unnamed
        return None


def _explain_node(node: ast.AST, func, frame, lineno: int, base: dict, exc=None) -> Explanation:
    op = classify(node, frame)
    if op is None:
        op = Operation("value", "value", [node])
    namer = _namer(frame)
    operands = [resolve_operand(n, frame, func, before=lineno, namer=namer) for n in op.operands]
    if op.kind == "module":
        weight = module_operand(op.module, op.module_text, frame)
        if weight is not None:
            operands.append(weight)
    if not any(o.shape is not None for o in operands):
        found = ", ".join(f"{o.text}: {o.kind}" for o in operands) or "no operands"
        return Explanation(**base, op=op.label, operands=tuple(operands),
                           problem=f"no tensor operand in {dotted(node)} (found {found})")
    diagnosis, hint = _diagnose(op, operands, frame, namer, exc)
    return Explanation(**base, op=op.label, operands=tuple(operands), diagnosis=diagnosis, hint=hint)


def _explain_lookup(node: ast.Subscript, func, frame, lineno: int, base: dict) -> Explanation:
    """A subscript that raised (``d["missing"]``, ``x[0, 5]``): the container and why the key is not in it."""
    local_map, global_map = frame_locals(frame), frame.f_globals
    operand = resolve_operand(node.value, frame, func, before=lineno, namer=_namer(frame))
    container = static_value(node.value, local_map, global_map)
    key = index_keys(node.slice, local_map, global_map) if is_tensor(container) else \
        static_value(node.slice, local_map, global_map)
    found = lookup_diagnosis(container, operand.text, MISSING if key is None and is_tensor(container) else key)
    return Explanation(**base, op="subscript", operands=(operand,), diagnosis=found, label="lookup")


def _exception_line(exc) -> str | None:
    if exc is None:
        return None
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first[:300]}" if first else type(exc).__name__


_EXC = {name: BaseException.__dict__[name] for name in ("__cause__", "__context__", "__suppress_context__",
                                                          "__traceback__")}  # a subclass's property cannot answer


def _causes(exc: BaseException):
    """(how, exception) down the chain: ``raise ... from e``'s cause, else the exception being handled."""
    seen = {id(exc)}
    for _ in range(8):
        cause = _EXC["__cause__"].__get__(exc)
        how = "explaining the cause"
        if cause is None and not _EXC["__suppress_context__"].__get__(exc):
            cause, how = _EXC["__context__"].__get__(exc), "explaining the exception it was raised while handling"
        if cause is None or id(cause) in seen:
            return
        seen.add(id(cause))
        yield how, cause
        exc = cause


_ATTRIBUTE_HOOKS = ("__getattr__", "__getattribute__")


def explain_traceback(tb, exc: BaseException | None = None) -> Explanation:
    """Usage: ``explain_traceback(exc.__traceback__, exc)``; see the module docstring. When ``exc`` has
    nothing to explain and an exception down its chain (``raise ... from e``, or one raised while handling
    another) has a mismatch (or at least an operation on tensors), that one is explained, and ``chained``
    says so."""
    top = _explain_one(tb, exc)
    if top.diagnosis or exc is None:
        return top
    for how, cause in _causes(exc):
        cause_tb = _EXC["__traceback__"].__get__(cause)
        if cause_tb is None:
            continue
        found = _explain_one(cause_tb, cause)
        if found.diagnosis or (top.problem and not found.problem):
            return replace(found, exception=top.exception, chained=f"{how}: {_exception_line(cause)}")
    return top


def _explain_one(tb, exc: BaseException | None) -> Explanation:
    frames = traceback_frames(tb)
    if not frames:
        raise ValueError("an empty traceback")
    inner_frame = frames[-1][0]
    if isinstance(exc, AttributeError):  # a class's __getattr__ raising is the caller's attribute access failing
        while len(frames) > 1 and frames[-1][0].f_code.co_name in _ATTRIBUTE_HOOKS:
            frames = frames[:-1]
    user = [(f, lasti) for f, lasti in frames if not is_internal(f.f_code.co_filename)]
    if not user:  # a catch stop inside torch: the traceback holds that frame only; its callers are live
        caller = frames[0][0].f_back
        while caller is not None and is_internal(caller.f_code.co_filename):
            caller = caller.f_back
        if caller is not None:
            user = [(caller, caller.f_lasti)]
    frame, lasti = user[-1] if user else frames[-1]
    notes = []
    if inner_frame is not frame:
        code = inner_frame.f_code
        notes.append(f"raised inside {os.path.basename(code.co_filename)}:{inner_frame.f_lineno} "
                     f"({code.co_name}), called from here")
    code = frame.f_code
    pos = _position(code, lasti)
    lineno = pos[0] if pos and pos[0] else frame.f_lineno
    base = dict(expression="", filename=code.co_filename, lineno=lineno, function=code.co_name,
                exception=_exception_line(exc), notes=tuple(notes))
    found = function_ast(code, lineno)
    if found is None and code.co_filename.startswith("<"):
        return Explanation(**base, problem=f"no source for {code.co_filename}:{lineno} ({code.co_name}): code made "
                                           "by exec/compile keeps none")
    if found is None:
        return Explanation(**base, problem=f"no source for {code.co_filename}:{lineno}: cannot parse the failing line")
    func = found[1]
    if pos is None or None in pos:
        return Explanation(**base, problem=f"no column positions for {os.path.basename(code.co_filename)}:{lineno} "
                                           "(python -X no_debug_ranges?): cannot find the failing expression")
    node = _failing_node(func, pos)
    if node is None:
        return Explanation(**base, problem=f"the failing code at {os.path.basename(code.co_filename)}:{lineno} is "
                                           "no call or operator: nothing to explain")
    base["expression"] = dotted(node)
    if isinstance(node, ast.Subscript):
        return _explain_lookup(node, func, frame, lineno, base)
    if not isinstance(node, (ast.Call, ast.BinOp, ast.Compare)):
        return Explanation(**base, problem=f"the failing code is {dotted(node)} ({type(node).__name__.lower()}): "
                                           "no shape operation to explain")
    return _explain_node(node, func, frame, lineno, base, exc)


def explain_expression(frame, text: str) -> Explanation:
    """Usage: ``explain_expression(frame, "q @ k.transpose(2, 3)")``; the same report for an expression
    typed at a stop (nothing raised): its operands, their producers, any mismatch. ``ValueError`` when
    ``text`` is not a Python expression."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"invalid expression {text.strip()!r}: {exc.msg}") from None
    code = frame.f_code
    lineno = frame.f_lineno
    found = function_ast(code, lineno)
    func = found[1] if found else None
    base = dict(expression=dotted(node), filename=code.co_filename, lineno=lineno, function=code.co_name)
    if isinstance(node, ast.Name) and node.id not in frame_locals(frame) and node.id not in frame.f_globals:
        return Explanation(**base, problem=f"{node.id} is not defined in {code.co_name} "
                                           f"({os.path.basename(code.co_filename)}:{lineno}); `up` to the frame that has it?")
    if static_value(node, frame_locals(frame), frame.f_globals) is MISSING and classify(node, frame) is None:
        return Explanation(**base, problem=f"{dotted(node)} is not read without running code: "
                                           "explain NAME, ATTR, x[CONST] or an operation on them")
    return _explain_node(node, func, frame, lineno, base)
