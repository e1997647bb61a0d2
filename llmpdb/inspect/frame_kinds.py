"""What kind of frame this is, for the model stack: plumbing to hide, and a frame's first tensor argument.

Usage::

    is_plumbing(frame)     # True for _call_impl, hooks, decorator wrappers, generate(), the debugger...
    tensor_arg(frame)      # TensorArg("hidden_states", (1, 7, 64), "f32") -- metadata only
    short_dtype(torch.bfloat16)   # "bf16"

Plumbing is recognised by file (and for a few files, function) name, so it works without importing torch
or transformers: torch's module call machinery, hooks, autocast/no_grad context decorators and dynamo;
transformers' output/kwarg decorators, gradient-checkpointing ``__call__`` and generation utilities;
accelerate's hooks; functools/contextlib wrappers; bdb/pdb/runpy and llmpdb itself.
"""

from __future__ import annotations

import functools
import inspect
import os
from dataclasses import dataclass

from ..units import format_shape
from .frames import frame_locals
from .safe import is_tensor, short_dtype

__all__ = ["TensorArg", "is_plumbing", "tensor_arg", "short_dtype"]

_SEP = os.sep
# (path fragment, function names or None for every function in that file) of frames that are plumbing.
_PLUMBING = (
    (f"torch{_SEP}nn{_SEP}modules{_SEP}module.py", None),
    (f"torch{_SEP}utils{_SEP}hooks.py", None),
    (f"torch{_SEP}utils{_SEP}_contextlib.py", None),
    (f"torch{_SEP}autograd{_SEP}grad_mode.py", None),
    (f"torch{_SEP}_dynamo{_SEP}", None),
    (f"torch{_SEP}_compile.py", None),
    (f"torch{_SEP}compiler{_SEP}", None),
    (f"torch{_SEP}amp{_SEP}autocast_mode.py", None),
    (f"transformers{_SEP}utils{_SEP}generic.py", None),
    (f"transformers{_SEP}utils{_SEP}deprecation.py", None),
    (f"transformers{_SEP}utils{_SEP}output_capturing.py", None),
    (f"transformers{_SEP}utils{_SEP}auto_docstring.py", None),
    (f"transformers{_SEP}generation{_SEP}", None),
    (f"transformers{_SEP}modeling_layers.py", ("__call__", "forward_with_checkpointing")),
    (f"transformers{_SEP}integrations{_SEP}hub_kernels.py", None),
    (f"accelerate{_SEP}hooks.py", None),
    (f"llmpdb{_SEP}", None),
)
_PLUMBING_STDLIB = ("functools.py", "contextlib.py", "bdb.py", "pdb.py", "runpy.py", "cmd.py", "threading.py")



@dataclass(frozen=True)
class TensorArg:
    """The first tensor argument of a frame: metadata only."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    device: str | None = None  # None on the CPU

    def summary(self) -> str:
        """Usage: ``arg.summary()`` -> ``"hidden_states (1, 7, 64) f32"``."""
        text = f"{self.name} {format_shape(self.shape)} {self.dtype}"
        return f"{text} {self.device}" if self.device else text


def _tensor_record(name: str, value) -> TensorArg | None:
    try:
        device = value.device
        device_text = None if device.type == "cpu" else str(device)
        return TensorArg(name, tuple(int(d) for d in value.shape), short_dtype(value.dtype), device_text)
    except Exception:  # a tensor subclass whose metadata raises: not worth failing the row
        return None


def tensor_arg(frame) -> TensorArg | None:
    """Usage: ``tensor_arg(frame)``; the first tensor among the frame's arguments (metadata only)."""
    code = frame.f_code
    count = code.co_argcount + code.co_kwonlyargcount
    names = list(code.co_varnames[:count])
    flags = code.co_flags
    if flags & inspect.CO_VARARGS:
        names.append(code.co_varnames[count])
        count += 1
    if flags & inspect.CO_VARKEYWORDS:
        names.append(code.co_varnames[count])
    local_map = frame_locals(frame)
    for name in names:
        if name == "self":
            continue
        value = local_map.get(name)
        if is_tensor(value):
            return _tensor_record(name, value)
        kind = type(value)  # by type: isinstance would ask a hostile argument's __class__
        if issubclass(kind, (tuple, list)):
            items = (tuple.__iter__ if issubclass(kind, tuple) else list.__iter__)(value)  # read in C
            for i, item in zip(range(8), items):
                if is_tensor(item):
                    return _tensor_record(f"{name}[{i}]", item)
        elif issubclass(kind, dict):
            for key, item in list(dict.items(value))[:16]:
                if is_tensor(item):
                    return _tensor_record(f"{name}[{key!r}]" if type(key) in (str, int) else f"{name}[…]", item)
    return None


def is_plumbing(frame) -> bool:
    """Usage: ``is_plumbing(frame)``; True for call machinery a reader of the model never wants to see."""
    code = frame.f_code
    filename = code.co_filename
    if filename.startswith("<frozen"):
        return True
    if filename == "<string>":  # pdb runs the script through exec() of a one-line string
        caller = frame.f_back
        return caller is not None and os.path.basename(caller.f_code.co_filename) == "bdb.py"
    for fragment, funcs in _PLUMBING:
        if fragment in filename and (funcs is None or code.co_name in funcs):
            return True
    base = os.path.basename(filename)
    if base in _PLUMBING_STDLIB:
        stdlib = os.path.dirname(functools.__file__)
        return os.path.dirname(filename) == stdlib
    return False
