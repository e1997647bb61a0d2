"""How a module breakpoint names what it stopped at: the module's path on the stack, labels that start with the
root's variable when two roots give the same path, and the one-line text of a condition's exception.

Usage::

    stack_name(frame, module, {id(model): "model"})   # "model.layers.1.self_attn"
    labelled(matches, names)                          # [(module, "student.model.layers.1.mlp"), ...], roots used
    exception_line(exc)                               # "NameError: name 'x' is not defined"
"""

from __future__ import annotations

from ..inspect.modules import frame_stack, module_frames

__all__ = ["stack_name", "labelled", "exception_line"]


def stack_name(frame, module, root_names: dict[int, str] | None = None) -> str | None:
    """The module's qualified name on the stack that reached ``frame`` (its root may be newer than the bp);
    with ``root_names`` (``{id(root): variable}``) it starts with the variable of the root on the stack."""
    try:
        records = module_frames(frame_stack(frame))
        for record in reversed(records):
            if record.module is module:
                outer = next(r for r in records if r.tree == record.tree)
                prefix = (root_names or {}).get(id(outer.module))
                if prefix:
                    return f"{prefix}.{record.qualname}" if record.qualname else prefix
                return record.qualname or f"(root {type(module).__name__})"
    except Exception as exc:  # naming is a nicety: never let it prevent the stop
        return f"({type(module).__name__}; naming failed: {type(exc).__name__})"
    return None


def labelled(matches, names: dict[int, str]) -> tuple[list[tuple[object, str]], dict[int, str]]:
    """``[(module, label)]`` for ``matches``; when two roots give the same label, every label starts with
    its root's variable (``student.model.layers.1.mlp``). Returns the root names used (``{}`` if none)."""
    roots_by_label: dict[str, set[int]] = {}
    for match in matches:
        roots_by_label.setdefault(match.label, set()).add(id(match.root))
    if all(len(ids) == 1 for ids in roots_by_label.values()):
        return [(m.module, m.label) for m in matches], {}
    used: dict[int, str] = {}
    out = []
    for match in matches:
        prefix = names.get(id(match.root)) or f"({type(match.root).__name__})"
        used[id(match.root)] = prefix
        name = match.names[0] if match.names else ""
        out.append((match.module, f"{prefix}.{name}" if name else prefix))
    return out, used


def exception_line(exc: BaseException) -> str:
    """``NameError: name 'x' is not defined``, on one line; the class name alone when ``str`` fails or
    is empty (the exception is the user's: its ``__str__`` may raise anything)."""
    name = type(exc).__name__
    try:
        text = " ".join(str(exc).split())
    except BaseException:
        return name
    if not isinstance(text, str) or not text:
        return name
    return f"{name}: {text[:200]}"
