"""What kind of frame this is, for the model stack: plumbing to hide, and a frame's first tensor argument.

Usage::

    is_plumbing(frame)     # True for _call_impl, hooks, decorator wrappers, generate(), the debugger...
    step_plumbing(frame)   # True where `s` does not stop: torch, transformers (but models/), accelerate...
    is_module_forward(frame)   # the frame runs the forward of an nn.Module (by the type of its self)
    tensor_arg(frame)      # TensorArg("hidden_states", (1, 7, 64), "f32") -- metadata only
    short_dtype(torch.bfloat16)   # "bf16"

Plumbing is recognised by file (and for a few files, function) name, so it works without importing torch
or transformers: torch's module call machinery, hooks, autocast/no_grad context decorators and dynamo;
transformers' output/kwarg decorators, gradient-checkpointing ``__call__`` and generation utilities;
accelerate's hooks; functools/contextlib wrappers; bdb/pdb/runpy and llmpdb itself.

``step_plumbing`` is the wider set ``s`` skips, like pdb's ``skip=``: every file of the torch,
transformers (except ``transformers/models/``, the modeling code) and accelerate packages, and the
standard library's call machinery (functools, contextlib, collections, abc, typing, the import system,
runpy); a module's ``forward`` is never plumbing, wherever its file is (``nn.Linear.forward``). The
verdict for a file is computed once and cached by file name, so a traced call costs a dict lookup.
"""

from __future__ import annotations

import functools
import inspect
import os
from dataclasses import dataclass

import sys

from ..units import format_shape
from .frames import frame_locals, frame_self
from .kinds import is_module, static_attr
from .safe import is_tensor, short_dtype

__all__ = ["TensorArg", "is_plumbing", "step_plumbing", "is_module_forward", "tensor_arg", "short_dtype"]

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
        if isinstance(value, (tuple, list)):
            for i, item in enumerate(value[:8]):
                if is_tensor(item):
                    return _tensor_record(f"{name}[{i}]", item)
        elif isinstance(value, dict):
            for key, item in list(value.items())[:16]:
                if is_tensor(item):
                    return _tensor_record(f"{name}[{key!r}]", item)
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


# ---- what `s` skips -------------------------------------------------------------------------------------
_STEP_PACKAGES = ("torch", "transformers", "accelerate")
_STEP_KEPT = {"transformers": "models" + _SEP}  # transformers/models/: the modeling code is the user's
_STEP_STDLIB = ("functools.py", "contextlib.py", "_collections_abc.py", "abc.py", "typing.py", "runpy.py",
                os.path.join("collections", "__init__.py"), os.path.join("importlib", "__init__.py"))
_STEP_FILES: dict[str, bool] = {}  # file name -> it is plumbing (the verdict, computed once per file)


def _package_dir(name: str) -> str | None:
    module = sys.modules.get(name)
    path = static_attr(module, "__file__", None) if module is not None else None
    if not isinstance(path, str):
        return None
    return os.path.dirname(os.path.abspath(path)) + _SEP


def _file_is_step_plumbing(filename: str) -> bool:
    if filename.startswith("<frozen"):  # runpy, importlib._bootstrap: the import system
        return True
    stdlib = os.path.dirname(functools.__file__) + _SEP
    if any(filename == stdlib + name for name in _STEP_STDLIB):
        return True
    for name in _STEP_PACKAGES:
        root = _package_dir(name)
        if root is not None and filename.startswith(root):
            kept = _STEP_KEPT.get(name)
            return not (kept and filename.startswith(root + kept))
    return False


def is_module_forward(frame) -> bool:
    """Usage: ``is_module_forward(frame)``; True when the frame runs ``forward`` with an nn.Module ``self``."""
    code = frame.f_code
    if code.co_name != "forward" or not code.co_argcount:
        return False
    return is_module(frame_self(frame))


def step_plumbing(frame) -> bool:
    """Usage: ``step_plumbing(frame)``; True for frames ``s`` steps through without stopping."""
    filename = frame.f_code.co_filename
    verdict = _STEP_FILES.get(filename)
    if verdict is None:
        verdict = _STEP_FILES[filename] = _file_is_step_plumbing(filename)
    return verdict and not is_module_forward(frame)
