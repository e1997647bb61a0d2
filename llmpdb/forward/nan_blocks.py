"""The modules ``nan-break --blocks`` checks: a model's blocks, a few per layer instead of every module.

Usage::

    blocks = check_blocks(model)     # [model, model.model, embed_tokens, layers.0, layers.1, norm, ..., lm_head]
    inside = modules_inside(blocks[3])   # every module under layers.0, itself left out
    bad_weights(blocks[3], bad_values)   # ["self_attn.q_proj.weight holds 1 NaN, 0 Inf of 4096", ...]

The rule reads the module tree only (types and each module's ``_modules`` dict; no property, no
``__getattr__`` of the user's classes): the root is a block; each item of a container (``ModuleList``,
``ModuleDict``, ``Sequential``) is a block and is not looked into; any other child is a block, looked
into only when a container lies somewhere below it (``LlamaModel`` holds ``layers``, ``T5Stack`` holds
``block``). So each decoder layer is one block, and what runs between layers (embeddings, norms, the
head) is one block each. A module reached twice (tied or shared) is one block.

Why blocks: torch leaves its hook-free fast path for every module that has a hook, and each check reads
a value; on a tiny Llama checking all 36 module calls of a forward costs about 1.25-1.35x, the 8 blocks
1.04-1.11x. The first block whose output is not finite is found in the same call; the module inside it is
found by checking every module inside that block only, from its next call on (``NanBreak``).
"""

from __future__ import annotations

import sys

__all__ = ["check_blocks", "modules_inside", "bad_weights"]

_LIMIT = 100_000  # modules walked at most: a bound on a tree someone built in a loop


def _named_children(module) -> list[tuple[str, object]]:
    try:
        modules = vars(module).get("_modules")
    except TypeError:  # no __dict__: not a torch module
        return []
    if not isinstance(modules, dict):
        return []
    return [(name, child) for name, child in modules.items() if child is not None]


def _children(module) -> list:
    return [child for _, child in _named_children(module)]


def _container_types() -> tuple:
    nn = sys.modules.get("torch.nn")
    if nn is None:
        return ()
    return tuple(t for t in (getattr(nn, "ModuleList", None), getattr(nn, "ModuleDict", None),
                             getattr(nn, "Sequential", None)) if isinstance(t, type))


def _holds_container(module, containers: tuple, seen: set) -> bool:
    """True when a container lies anywhere below ``module`` (iterative; each module visited once)."""
    stack = list(_children(module))
    while stack and len(seen) < _LIMIT:
        child = stack.pop()
        if id(child) in seen:
            continue
        seen.add(id(child))
        if isinstance(child, containers):
            return True
        stack.extend(_children(child))
    return False


def check_blocks(root) -> list:
    """The blocks of ``root`` in tree order (root first), each module once; see the module docstring."""
    containers = _container_types()
    blocks, seen = [], set()

    def add(module) -> bool:
        if id(module) in seen:
            return False
        seen.add(id(module))
        blocks.append(module)
        return True

    stack = [(root, True)]
    while stack and len(blocks) < _LIMIT:
        module, look_inside = stack.pop()
        if not add(module) or not look_inside:
            continue
        is_container = isinstance(module, containers)
        todo = []
        for child in _children(module):
            if isinstance(child, containers):
                todo.append((child, True))  # a pass-through: its items are the blocks
            elif is_container:
                todo.append((child, False))  # an item: a block, not looked into
            else:
                todo.append((child, _holds_container(child, containers, set())))
        stack.extend(reversed(todo))
    return [b for b in blocks if not isinstance(b, containers) or b is root]


def modules_inside(block) -> list:
    """Every module under ``block`` (each once, ``block`` left out), in tree order."""
    return [module for _, module in _named_inside(block)]


def bad_weights(block, bad_values, limit: int = 3) -> list[str]:
    """The parameters and buffers of ``block`` (recursively) that hold a NaN or an Inf, at most ``limit``,
    each as ``"mlp.down_proj.weight holds 1 NaN, 0 Inf of 8192"``; read from the tensors' values."""
    found = []
    for prefix, module in [("", block)] + _named_inside(block):
        for kind in ("_parameters", "_buffers"):
            tensors = vars(module).get(kind)
            if not isinstance(tensors, dict):
                continue
            for name, tensor in tensors.items():
                if tensor is None:
                    continue
                bad = bad_values(tensor)
                if bad is not None:
                    found.append(f"{prefix}{name} holds {bad}")
                    if len(found) >= limit:
                        return found
    return found


def _named_inside(block) -> list[tuple[str, object]]:
    """``("mlp.down_proj.", module)`` for every module under ``block``, each once, in tree order."""
    named, seen = [], {id(block)}
    stack = [(f"{name}.", child) for name, child in reversed(_named_children(block))]
    while stack and len(named) < _LIMIT:
        prefix, module = stack.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        named.append((prefix, module))
        stack.extend((f"{prefix}{name}.", child) for name, child in reversed(_named_children(module)))
    return named
