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
accelerate's hooks; functools/contextlib wrappers; bdb/pdb/runpy and llmpdb itself (by the package's own
folder, never by a folder name: a user's checkout may be called ``llmpdb/``).

``step_plumbing`` is the wider set ``s`` skips, like pdb's ``skip=``: every file of the torch,
transformers (except ``transformers/models/``, the modeling code) and accelerate packages and of the
standard library, and the module and class bodies of other installed packages (``s`` on ``import torch``
steps over the import); a module's ``forward`` is never plumbing, wherever its file is
(``nn.Linear.forward``). The verdict for a file is computed once and cached by file name, so a traced
call costs a dict lookup.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import sysconfig
from dataclasses import dataclass

from ..units import format_shape
from .frames import frame_locals, frame_self
from .kinds import is_module, static_attr
from .safe import is_tensor, no_torch_function, short_dtype

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
    (f"transformers{_SEP}integrations{_SEP}accelerate.py", ("wrapped",)),  # force_accelerate_hooks (5.25 Mamba)
    (f"{_SEP}kernels{_SEP}layer", None),          # the `kernels` package's wrapper of a hub kernel's forward
    (f"{_SEP}kernels{_SEP}_internals{_SEP}layer{_SEP}", None),  # the same from kernels 0.19 (transformers 5.25)
    (f"{_SEP}debugpy{_SEP}", None),               # VS Code's debugger, its vendored pydevd included
    (f"{_SEP}_pydevd_bundle{_SEP}", None),        # PyCharm's pydevd
    (f"{_SEP}_pydev_bundle{_SEP}", None),
    (f"{_SEP}_pydevd_frame_eval{_SEP}", None),
    (f"{_SEP}pydevd.py", None),
)
# llmpdb's own code, by the package's real location (a path fragment would hide a user's checkout named llmpdb/)
_OWN_PACKAGE = os.path.dirname(os.path.dirname(__file__))
_OWN_DIRS = tuple({_OWN_PACKAGE + _SEP, os.path.abspath(_OWN_PACKAGE) + _SEP,
                   os.path.realpath(_OWN_PACKAGE) + _SEP})
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
        with no_torch_function():
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
    if filename.startswith(_OWN_DIRS):
        return True
    for fragment, funcs in _PLUMBING:
        if fragment in filename and (funcs is None or code.co_name in funcs):
            return True
    base = os.path.basename(filename)
    if base in _PLUMBING_STDLIB:
        stdlib = os.path.dirname(functools.__file__)
        return os.path.dirname(filename) == stdlib
    return False


# ---- what `s` skips -------------------------------------------------------------------------------------
_STEP_PACKAGES = ("torch", "transformers", "accelerate", "_distutils_hack")  # the last: setuptools' import hook
# transformers/models/ (but its auto classes) is modeling code: an installed package's, not plumbing
_STEP_KEPT = {"transformers": ("models" + _SEP, os.path.join("models", "auto") + _SEP)}
_STEP_FILES: dict[str, int] = {}  # file name -> one of these kinds (_K_PACKAGE: another installed package)
_K_USER, _K_PACKAGE, _K_PLUMBING, _K_LIKE_CALLER = 0, 1, 2, 3
_DIRS: dict[str, tuple[str, ...]] = {}
_CALLER_WALK = 32  # callers looked at for a package function; past that it counts as the user's


def _dirs(kind: str) -> tuple[str, ...]:
    if kind not in _DIRS:
        paths = sysconfig.get_paths()
        keys = ("stdlib", "platstdlib") if kind == "stdlib" else ("purelib", "platlib")
        _DIRS[kind] = tuple(sorted({os.path.abspath(paths[key]) + _SEP for key in keys}))
    return _DIRS[kind]


def _package_dir(name: str) -> str | None:
    module = sys.modules.get(name)
    path = static_attr(module, "__file__", None) if module is not None else None
    if not isinstance(path, str):
        return None
    return os.path.dirname(os.path.abspath(path)) + _SEP


def _step_kind(filename: str) -> int:
    if filename.startswith("<frozen"):  # runpy, importlib._bootstrap, collections.abc: the standard library
        return _K_PLUMBING
    if filename.startswith("<"):  # <string>: exec'd code (a dataclass __init__...), as plumbing as its caller
        return _K_LIKE_CALLER
    for name in _STEP_PACKAGES:
        root = _package_dir(name)
        if root is not None and filename.startswith(root):
            kept, unkept = _STEP_KEPT.get(name, (None, None))
            if kept and filename.startswith(root + kept) and not filename.startswith(root + unkept):
                return _K_PACKAGE
            return _K_PLUMBING
    if filename.startswith(_dirs("packages")):
        return _K_PACKAGE
    if filename.startswith(_dirs("stdlib")):
        return _K_PLUMBING
    return _K_USER


def is_module_forward(frame) -> bool:
    """Usage: ``is_module_forward(frame)``; True when the frame runs ``forward`` with an nn.Module ``self``."""
    code = frame.f_code
    if code.co_name != "forward" or not code.co_argcount:
        return False
    return is_module(frame_self(frame))


def _kind_of(filename: str) -> int:
    kind = _STEP_FILES.get(filename)
    if kind is None:
        kind = _STEP_FILES[filename] = _step_kind(filename)
    return kind


def _run_by_bdb(frame) -> bool:
    caller = frame.f_back
    return (caller is not None and caller.f_code.co_name == "run"
            and os.path.basename(caller.f_code.co_filename) == "bdb.py")


def step_plumbing(frame) -> bool:
    """Usage: ``step_plumbing(frame)``; True for frames ``s`` steps through without stopping.

    A function of another installed package (or code exec'd from a string) is as much plumbing as its
    caller: ``np.mean`` called by the user stops, called by torch it does not."""
    for _ in range(_CALLER_WALK):
        code = frame.f_code
        kind = _kind_of(code.co_filename)
        if kind == _K_USER or (kind == _K_LIKE_CALLER and _run_by_bdb(frame)):
            return False  # the second: code typed at the prompt (``debug CODE``), run by bdb's run()
        if kind == _K_PLUMBING:
            return not is_module_forward(frame)
        if kind == _K_PACKAGE and not code.co_flags & inspect.CO_OPTIMIZED:
            return True  # a module or class body: an import
        if kind == _K_PACKAGE and is_module_forward(frame):
            return False
        frame = frame.f_back
        if frame is None:
            return False
    return False
