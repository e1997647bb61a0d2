"""Where the ``forward`` that actually runs for a module is defined, through wrappers and decorators.

Usage::

    location = forward_location(model)          # ForwardLocation(steps=[...])
    location.final.filename, location.final.lineno   # the def line of the forward that does the work
    [step.via for step in location.steps]       # "", "_orig_mod (torch.compile)", "module (DDP)"...

Each step is one module on the way in: a torch.compile ``OptimizedModule`` leads to ``_orig_mod``, DDP/FSDP
to ``module``, PEFT to ``base_model.model``. For the last module, the ``forward`` Python calls is
``module.forward`` (an instance attribute, e.g. accelerate's hooks, wins over the class's); decorators are
looked through with ``__wrapped__`` (``inspect.unwrap``) and their names listed. The line is the ``def``
line, not the first decorator's.
"""

from __future__ import annotations

import functools
import linecache
from dataclasses import dataclass

from .modules import is_module, unwrap_model

__all__ = ["ForwardStep", "ForwardLocation", "forward_location", "def_line"]


@dataclass(frozen=True)
class ForwardStep:
    """One module on the way to the forward that runs."""

    class_name: str
    via: str                           # "" for the module asked about, "_orig_mod (torch.compile)"...
    function: str | None = None        # "LlamaForCausalLM.forward"; None for a wrapper step
    filename: str | None = None
    lineno: int | None = None
    decorators: tuple[str, ...] = ()   # wrappers looked through, outermost first
    instance_forward: bool = False     # ``forward`` is set on the instance (hooks, patches)


@dataclass(frozen=True)
class ForwardLocation:
    """The wrappers of a module, outermost first; ``final`` is the forward that does the work."""

    steps: tuple[ForwardStep, ...]

    @property
    def final(self) -> ForwardStep:
        return self.steps[-1]


def def_line(code) -> int:
    """Usage: ``def_line(func.__code__)``; the line of ``def`` (``co_firstlineno`` is the first decorator's)."""
    first = code.co_firstlineno
    for lineno in range(first, first + 60):
        line = linecache.getline(code.co_filename, lineno).lstrip()
        if not line:
            if lineno > first:  # no source (or a blank line): keep what the code object says
                break
            continue
        if line.startswith(("def ", "async def ")):
            return lineno
    return first


def _decorator_name(func) -> str:
    code = getattr(func, "__code__", None)  # functools.wraps copies __qualname__; the code keeps its own
    qualname = (getattr(code, "co_qualname", None) or getattr(func, "__qualname__", None)
                or getattr(func, "__name__", None) or type(func).__name__)
    if "<locals>" in qualname:
        outer = qualname.split(".<locals>", 1)[0]
        # a wrapper built inside a dunder (GradientCheckpointingLayer.__init_subclass__): its own name says more
        return qualname.rsplit(".", 1)[-1] if outer.rsplit(".", 1)[-1].startswith("__") else outer
    return qualname


def _unwrap(func) -> tuple[object, list[str]]:
    """Follow ``__wrapped__``, partials and bound methods; return the function and the decorator names."""
    decorators = []
    seen = set()
    for _ in range(30):
        if id(func) in seen:
            break
        seen.add(id(func))
        inner = getattr(func, "__func__", None)
        if inner is not None and inner is not func:
            func = inner
            continue
        try:
            wrapped = getattr(func, "__wrapped__", None)
        except Exception:  # a raising __getattr__ on a callable object
            wrapped = None
        if isinstance(func, functools.partial):
            decorators.append(f"partial({getattr(func.func, '__name__', type(func.func).__name__)})")
            func = wrapped if wrapped is not None else func.func
            continue
        if wrapped is None:
            break
        decorators.append(_decorator_name(func))
        func = wrapped
    return func, decorators


def _forward_step(module, via: str) -> ForwardStep:
    cls = type(module)
    try:
        own = vars(module).get("forward")
    except TypeError:
        own = None
    forward = own if own is not None else getattr(cls, "forward", None)
    func, decorators = _unwrap(forward)
    code = getattr(func, "__code__", None)
    if code is None:
        return ForwardStep(cls.__name__, via, _decorator_name(func), None, None, tuple(decorators), own is not None)
    return ForwardStep(
        class_name=cls.__name__, via=via,
        function=getattr(code, "co_qualname", None) or getattr(func, "__qualname__", code.co_name),
        filename=code.co_filename, lineno=def_line(code), decorators=tuple(decorators),
        instance_forward=own is not None)


def forward_location(module) -> ForwardLocation:
    """Usage: ``forward_location(model)``; also accepts a module class (its own ``forward``)."""
    if isinstance(module, type):
        func, decorators = _unwrap(getattr(module, "forward", None))
        code = getattr(func, "__code__", None)
        if code is None:
            raise TypeError(f"{module.__name__} has no Python forward")
        name = getattr(code, "co_qualname", None) or getattr(func, "__qualname__", code.co_name)
        return ForwardLocation((ForwardStep(module.__name__, "", name, code.co_filename,
                                            def_line(code), tuple(decorators)),))
    if not is_module(module):
        raise TypeError(f"not a module: {type(module).__name__} (no named_modules/forward)")
    inner, chain = unwrap_model(module)
    steps = []
    via = ""
    for wrapper, kind, attr in chain:
        # torch.compile's forward is dynamo's frame-evaluation shim: no source worth opening.
        steps.append(ForwardStep(type(wrapper).__name__, via) if kind == "torch.compile"
                     else _forward_step(wrapper, via))
        via = f"{attr} ({kind})"
    steps.append(_forward_step(inner, via))
    return ForwardLocation(tuple(steps))
