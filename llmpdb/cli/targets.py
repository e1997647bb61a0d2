"""The program ``python -m llmpdb`` runs: pdb's script and module targets, with ``__main__`` set as
``python script.py`` / ``python -m module`` set it.

Usage::

    target = program_target(stdlib_pdb, "train.py", as_module=False)   # or ("pkg.mod", as_module=True)
    debugger._run(target)

pdb's own targets leave ``__spec__`` out of a script's ``__main__`` (3.11, 3.12), and on 3.11 hand their
own ``str`` subclass to runpy, so a module's ``__spec__.name`` (and a script's ``__file__``) is an
instance of a class of pdb's. ``multiprocessing``'s spawn start method reads ``__main__.__spec__`` and
pickles both for the child, which then re-imports the main module as ``__mp_main__``: under plain pdb it
fails (``AttributeError: module '__main__' has no attribute '__spec__'``, or ``PicklingError: Can't pickle
<class 'pdb._ModuleTarget'>``). Here a script's ``__main__`` gets ``__spec__ = None`` and a plain-``str``
``__file__`` (as ``runpy.run_path`` gives), a module's a spec whose name is a plain ``str``.
"""

from __future__ import annotations

import copy

__all__ = ["program_target"]


def _plain(value):
    return str.__str__(value) if isinstance(value, str) else value


def _namespace(namespace: dict) -> dict:
    namespace = dict(namespace)
    namespace.setdefault("__spec__", None)
    if "__file__" in namespace:
        namespace["__file__"] = _plain(namespace["__file__"])
    spec = namespace["__spec__"]
    if spec is not None and type(getattr(spec, "name", "")) is not str:
        spec = copy.copy(spec)
        spec.name = _plain(spec.name)
        namespace["__spec__"] = spec
    return namespace


def program_target(stdlib_pdb, name: str, as_module: bool):
    """Usage: ``program_target(stdlib_pdb, args[0], as_module)``; pdb's target for it (its errors propagate)."""
    base = stdlib_pdb._ModuleTarget if as_module else stdlib_pdb._ScriptTarget

    class Target(base):
        @property
        def namespace(self):
            return _namespace(super().namespace)

    Target.__name__ = Target.__qualname__ = base.__name__  # the fast engine knows a script target by name
    return Target(name)
