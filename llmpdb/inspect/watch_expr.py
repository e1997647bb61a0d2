"""Watch expressions that cannot change the program: ``compile_watch`` refuses calls but pure tensor methods.

Usage::

    code = compile_watch("hidden_states.view(-1).shape")   # a code object; WatchRefused for lst.pop()
    eval(code, frame.f_globals, {**locals_copy, GUARD: pure_call})

A watch is evaluated at every stop, unasked, so it must not change what it watches: ``watch lst.pop()``
would pop an item at each stop. Names, attributes, subscripts, operators, literals, comprehensions and
``:=`` (on a copy of the locals) are kept. A call is refused when the expression is compiled, except
``len(...)`` and the methods in ``PURE_TENSOR_METHODS`` (``x.size()``, ``x.view(-1)``, ``x.float()``...);
those run through ``pure_call``, which calls the method only on a real ``torch.Tensor`` (its type, never
``isinstance``) and otherwise fails that stop's value with one line. Attribute and item access still run the
object's own getters, as every debugger's watch does; they are reads, not the calls this refuses.
"""

from __future__ import annotations

import ast
from typing import Any

from .safe import is_tensor, type_name

__all__ = ["compile_watch", "pure_call", "WatchRefused", "GUARD", "PURE_TENSOR_METHODS", "PURE_FUNCTIONS"]

GUARD = "__llmpdb_pure_call__"
PURE_TENSOR_METHODS = frozenset({
    "size", "dim", "numel", "element_size", "stride", "is_contiguous", "view", "reshape", "transpose",
    "permute", "t", "flatten", "squeeze", "unsqueeze", "contiguous", "chunk", "split", "unbind", "narrow",
    "select", "float", "half", "bfloat16", "double", "int", "long", "bool", "detach", "abs", "sum",
    "mean", "amax", "amin", "isnan", "isinf", "isfinite", "any", "all", "count_nonzero",
})
PURE_FUNCTIONS = frozenset({"len"})


class WatchRefused(ValueError):
    """The expression could change the program; the message is one line saying which call and why."""


class _Guard(ast.NodeTransformer):
    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Name) and func.id in PURE_FUNCTIONS:
            return node
        if isinstance(func, ast.Attribute) and func.attr in PURE_TENSOR_METHODS:
            guarded = ast.Call(func=ast.Name(GUARD, ast.Load()), args=[func.value, ast.Constant(func.attr), *node.args],
                               keywords=node.keywords)
            return ast.copy_location(guarded, node)
        called = ast.unparse(func)
        raise WatchRefused(
            f"{called}(...) is a call: a watch runs at every stop and a call could change the program "
            f"(lst.pop() would pop each time); calls allowed: len() and tensor methods such as size(), "
            f"view(), float(), sum() (help watch lists them)")


def compile_watch(text: str):
    """Usage: ``compile_watch("x.shape")``; raises ``SyntaxError`` (bad expression) or ``WatchRefused``."""
    tree = ast.parse(text, "<llmpdb watch>", "eval")
    if any(isinstance(node, ast.Name) and node.id == GUARD for node in ast.walk(tree)):
        raise WatchRefused(f"{GUARD} is llmpdb's own name")
    tree = ast.fix_missing_locations(_Guard().visit(tree))
    return compile(tree, "<llmpdb watch>", "eval")


def pure_call(obj: Any, name: str, *args, **kwargs):
    """Usage: ``pure_call(x, "view", -1)``; ``x.view(-1)`` when ``x`` is a torch.Tensor, else TypeError."""
    if not is_tensor(obj):
        raise TypeError(f"{name}() is run by a watch only on a tensor, not on a {type_name(obj)}")
    return getattr(obj, name)(*args, **kwargs)
