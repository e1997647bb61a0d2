"""What a called layer expects, told by its class: a ``Linear``'s in_features, a ``Conv1D``'s rows, an
``Embedding``'s num_embeddings.

Usage::

    layer_kind(model.transformer.wpe)        # "embedding"  (torch.nn.Embedding in type(m).__mro__)
    layer_kind(model.lm_head)                # "linear"; a user's class that is no Linear: None
    torch_callable(torch.matmul)             # True; a user's function named matmul: False
    layer_diagnosis("embedding", wpe, "transformer.wpe", operands, exc)
    # ("position_ids holds an index ≥ 64 or < 0: transformer.wpe (Embedding) has num_embeddings 64 ...", hint)

The kind comes from ``type(m).__mro__`` holding torch's (or transformers') own class, never from the
module object's attributes; sizes are read from the instance dict or the weight's shape. An Embedding's
index values are never read (that is tensor data): the diagnosis says "an index ≥ N", not which one.
"""

from __future__ import annotations

import sys
import types

from .kinds import stored
from .safe import is_tensor, type_name
from .shape_ops import Mismatch

__all__ = ["layer_kind", "torch_callable", "layer_diagnosis"]

_TYPE_MRO = type.__dict__["__mro__"]  # read through type's own descriptor: a metaclass cannot answer
_LAYERS = (("linear", "torch.nn.modules.linear", "Linear"),
           ("embedding", "torch.nn.modules.sparse", "Embedding"),
           ("conv1d", "transformers.pytorch_utils", "Conv1D"))


def _library_class(module_name: str, class_name: str) -> type | None:
    module = sys.modules.get(module_name)
    klass = vars(module).get(class_name) if isinstance(module, types.ModuleType) else None
    return klass if isinstance(klass, type) else None


def layer_kind(module) -> str | None:
    """Usage: ``layer_kind(m)`` -> ``"linear"`` / ``"embedding"`` / ``"conv1d"`` (transformers' GPT-2
    ``Conv1D``: ``x @ weight``) by the classes of ``type(m).__mro__``; None for any other class."""
    mro = _TYPE_MRO.__get__(type(module))
    for kind, module_name, class_name in _LAYERS:
        klass = _library_class(module_name, class_name)
        if klass is not None and klass in mro:
            return kind
    return None


def torch_callable(callee) -> bool:
    """Usage: ``torch_callable(torch.cat)``; a function of torch (or a tensor's bound method), by its
    exact type and ``__module__`` (C and plain functions answer without running user code)."""
    kind = type(callee)
    if kind is types.BuiltinFunctionType:
        owner = callee.__self__
        if is_tensor(owner):
            return True
        name = callee.__module__
    elif kind is types.FunctionType:
        name = callee.__module__
    else:
        return False
    return type(name) is str and name.split(".", 1)[0] == "torch"


def _int_attr(module, name: str) -> int | None:
    value = stored(module, name)
    return value if type(value) is int else None


def _linear(module, where: str, x: tuple[int, ...], weight) -> tuple[Mismatch | None, str | None]:
    in_features = _int_attr(module, "in_features") if module is not None else None
    if in_features is None and weight is not None and len(weight) == 2:
        in_features = weight[1]
    if in_features is None or not x or x[-1] == in_features:
        return None, None
    return (Mismatch(0, len(x) - 1, 1, 1, x[-1], in_features, "input's last dim vs the weight's in_features"),
            f"{where} expects in_features {in_features}; the input's last dim is {x[-1]}")


def _conv1d(where: str, x: tuple[int, ...], weight) -> tuple[Mismatch | None, str | None]:
    if weight is None or len(weight) != 2 or not x or x[-1] == weight[0]:
        return None, None
    rule = "input's last dim vs the weight's rows (Conv1D: x @ weight)"
    return (Mismatch(0, len(x) - 1, 1, 0, x[-1], weight[0], rule),
            f"{where} expects {weight[0]} input features (Conv1D weight is (in, out)); the input's last dim is {x[-1]}")


def _is_index_error(exc) -> bool:
    return exc is not None and IndexError in _TYPE_MRO.__get__(type(exc))


def _embedding(module, where: str, operands, exc) -> tuple[str | None, str | None]:
    if not _is_index_error(exc):
        return None, None  # a dtype or device error: nothing is known about the indices
    weight = operands[1].shape if len(operands) > 1 else None
    rows = _int_attr(module, "num_embeddings") if module is not None else None
    rows = rows if rows is not None else (weight[0] if weight else None)
    index = operands[0]
    if rows is None:
        return f"{index.text} holds an index out of range (num_embeddings ?; index values not read)", None
    diagnosis = (f"{index.text} holds an index ≥ {rows} or < 0: {where} has num_embeddings {rows} "
                 "(index values not read)")
    prov = index.provenance
    from_arange = prov is not None and "arange" in " ".join((prov.origin, *prov.steps))
    if from_arange and index.shape and index.shape[-1] > rows:
        return diagnosis, (f"{index.text} counts {index.shape[-1]} positions (from arange) and {where} has "
                           f"{rows}: the input is longer than the model's positions?")
    return diagnosis, None


def layer_diagnosis(kind: str, module, path: str | None, operands, exc) -> tuple[object, str | None]:
    """Usage: ``layer_diagnosis("linear", m, "fc2", [x, weight], exc)`` -> (Mismatch or text or None, hint);
    ``operands`` are the input then the weight (``Operand``); ``module`` None for ``F.embedding``."""
    where = f"{path} ({type_name(module)})" if path and module is not None else "the weight"
    x = operands[0].shape if operands else None
    weight = operands[1].shape if len(operands) > 1 else None
    if kind == "embedding":
        return _embedding(module, where, operands, exc)
    if x is None:
        return None, None
    if kind == "linear":
        return _linear(module, where, x, weight)
    if kind == "conv1d":
        return _conv1d(where, x, weight)
    return None, None
