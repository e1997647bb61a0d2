"""The variables that name the root models in sight, to tell two models of one class apart.

Usage::

    found = models_in_sight(stack, index)     # [("student", m1), ("teacher", m2)]: the user's frames' models
    names = ambiguous_root_names(found)       # {id(m1): "student", id(m2): "teacher"} or {} (no ambiguity)
    tree_root_names(model_stack(stack), names)    # {tree index: "teacher"} for the stack's models

A stack row or a stop header says ``(root)`` and ``model.layers.1.mlp``, names relative to the root model.
With two models of the same class in sight (a teacher and a student, a model and its reference copy)
that does not say which one runs; the variable the root is bound to does. The frames looked at are the
current one first, then the user's own frames outward (module forwards and plumbing are skipped), then
the current frame's globals; each model keeps the first name it is found under. Locals are read with
``frame_locals`` (the debugger's pinned mapping at a stop), so no edit made at the prompt is lost.
"""

from __future__ import annotations

from .frame_kinds import is_plumbing
from .frames import frame_locals, frame_self
from .kinds import is_module
from .modules import top_level_models, unwrap_model

__all__ = ["models_in_sight", "ambiguous_root_names", "tree_root_names"]


def _runs_a_forward(frame) -> bool:
    return frame.f_code.co_varnames[:1] == ("self",) and is_module(frame_self(frame))


def models_in_sight(stack, index: int | None = None) -> list[tuple[str, object]]:
    """Usage: ``models_in_sight(pdb.stack, pdb.curindex)``; ``[(variable, root model)]``, each model once."""
    if not stack:
        return []
    index = len(stack) - 1 if index is None else index
    current = stack[index][0]
    frames = [current] + [f for f, _ in reversed(stack[:index])
                          if not is_plumbing(f) and not _runs_a_forward(f)]
    candidates: list[tuple[str, object]] = []
    for frame in frames:
        for name, value in frame_locals(frame).items():
            if name != "self" and not str(name).startswith("__"):
                candidates.append((str(name), value))
    try:
        candidates.extend((str(k), v) for k, v in dict(current.f_globals).items() if not str(k).startswith("__"))
    except Exception:  # globals that refuse to be listed: the locals are enough
        pass
    return top_level_models(candidates)


def ambiguous_root_names(found: list[tuple[str, object]]) -> dict[int, str]:
    """Usage: ``ambiguous_root_names(models_in_sight(...))``; ``{id(module): variable}`` for each model in
    sight whose class another model in sight shares (wrapped models under their wrapper's name too), else
    ``{}``. A model alone of its class stays ``(root)``: the modules a library keeps in its globals (the
    parameterless ``Func`` wrappers of transformers' Mamba kernels) collide among themselves, not with it."""
    classes = [type(unwrap_model(module)[0]).__name__ for _, module in found]
    shared = {c for c in classes if classes.count(c) > 1}
    names: dict[int, str] = {}
    for (name, module), cls in zip(found, classes):
        if cls not in shared:
            continue
        names.setdefault(id(module), name)
        names.setdefault(id(unwrap_model(module)[0]), name)
    return names


def tree_root_names(entries, names: dict[int, str]) -> dict[int, str]:
    """Usage: ``tree_root_names(model_stack(stack), names)``; ``{tree: variable}`` for each model on the
    stack whose outermost frame is a root in ``names`` (a tree entered through a submodule has none)."""
    trees: dict[int, str] = {}
    seen: set[int] = set()
    for entry in entries:
        record = entry.module
        if record is None or record.tree in seen:
            continue
        seen.add(record.tree)
        name = names.get(id(record.module))
        if name is not None and (record.qualname == "" or record.wrapper):
            trees[record.tree] = name
    return trees
