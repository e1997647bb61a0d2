"""Pause at the first module whose output (or output gradient) holds a NaN or an Inf.

Usage::

    engine = nan_breaks()                 # the process's engine (kept in the session)
    engine.arm(grad=False, roots=[model]) # outputs: a global forward hook
    engine.arm(grad=True, roots=[model])  # gradients too: each output that requires grad gets a tensor hook
    engine.disarm()                       # every hook off

How it checks: one reduction per floating-point output tensor of every module call, ``t.sum()``, whose
result is finite exactly when every value is (``bad_values``; a non-finite sum is confirmed with
``isfinite(t).all()``). This reads values: the user asked for it by arming it. The hook is global
(``register_module_forward_hook``, built in ``nan_check``), so modules created later are checked too;
it folds away inside a graph dynamo is compiling. With ``grad`` armed, the same forward hook registers a hook on each output
tensor that requires grad, and that hook checks the gradient with respect to the output when backward
reaches it (a tensor hook, not ``register_full_backward_hook``: that one wraps every module's inputs and
outputs in ``BackwardHookFunction``, warns for every module returning a ``ModelOutput`` and breaks in-place
ops on views).

How it stops: the first hit disarms everything (the enclosing modules' outputs hold the same NaN), then
stops through ``SESSION.stopper`` in the frame that called the hook: for an output, torch's module call
(``self`` is the module, ``result`` its output; ``up`` reaches the caller's forward); for a gradient, the
frame that runs ``backward()``. The header names the module path, the tensor and the counts.
"""

from __future__ import annotations

import cmath
import math
import os
import sys
import weakref

from ..inspect.frames import frame_self
from ..inspect.kinds import is_module
from ..inspect.modules import model_names
from ..inspect.safe import safe_getattr
from ..inspect.shape_summary import tensor_summary
from ..session import SESSION
from .arming import AfterImport, after_import_pending, remove_after_imports
from .nan_check import output_check

__all__ = ["NanBreak", "nan_breaks", "bad_values"]

_LLMPDB_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_DYNAMO_DIR = os.path.join("torch", "_dynamo") + os.sep


def _caller(frame):
    """The first frame outside llmpdb and dynamo's ``disable`` wrapper: the hook's real caller."""
    while frame is not None and (frame.f_code.co_filename.startswith(_LLMPDB_DIR)
                                 or _DYNAMO_DIR in frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def bad_values(t) -> str | None:
    """Usage: ``bad_values(t)`` -> ``"3 NaN, 1 Inf of 448"`` or None when every value is finite.

    One reduction, ``t.sum()`` (values are read): a finite sum means every value is finite (a NaN or an
    Inf makes the sum NaN or infinite); only a non-finite sum, a real hit or an overflow of the sum, is
    confirmed with ``isfinite(t).all()``. Measured on CPU, the sum costs 2 µs where ``isfinite(t).all()``
    costs 18 µs on a (2, 32, 64) tensor, and 5 ms against 330 ms on (8, 512, 4096): it builds no bool
    tensor. Integer, bool and meta tensors are never checked."""
    torch = sys.modules.get("torch")
    if torch is None or safe_getattr(t, "is_meta", False):
        return None
    if not (t.is_floating_point() or t.is_complex()) or t.numel() == 0:
        return None
    total = t.detach().sum().item()
    if (cmath.isfinite(total) if isinstance(total, complex) else math.isfinite(total)):
        return None
    if bool(torch.isfinite(t).all()):  # the sum overflowed (f16 / bf16): every value is finite
        return None
    nan, inf = int(torch.isnan(t).sum()), int(torch.isinf(t).sum())
    return f"{nan} NaN, {inf} Inf of {t.numel()}"


_TORCH_MODULE = "torch.nn.modules.module"
_OWNER = "nan-break"  # its AfterImport finder, armed before `import torch`


def _outermost_module(frame, limit: int = 400):
    """The ``self`` of the outermost module forward on the stack (the model being called), or None."""
    found = None
    while frame is not None and limit > 0:
        candidate = frame_self(frame)
        if is_module(candidate):
            found = candidate
        frame, limit = frame.f_back, limit - 1
    return found


class NanBreak:
    """The nan-break hooks of one process; ``stopper(frame, header)`` opens the debugger (tests swap it)."""

    def __init__(self, stopper=None):
        self.stopper = stopper or (lambda frame, header: SESSION.open_debugger(frame, header))
        self.outputs = False
        self.grads = False
        self._handle = None
        self._roots: list[weakref.ref] = []
        self.checked = 0
        self.messages: list[str] = []

    @property
    def armed(self) -> bool:
        return self._handle is not None or self.pending

    @property
    def pending(self) -> bool:
        """Armed before ``import torch``: the hook goes in once torch's module class exists."""
        return self._handle is None and after_import_pending(_OWNER)

    def arm(self, *, grad: bool = False, roots=()) -> None:
        """Check outputs (``grad=False``) or gradients too (``grad=True``) from the next module call on."""
        if grad:
            self.grads = True
        else:
            self.outputs = True
        for root in roots:
            if all(ref() is not root for ref in self._roots):
                self._roots.append(weakref.ref(root))
        if self._handle is None and _TORCH_MODULE not in sys.modules:  # before `import torch`: armed then
            if not after_import_pending(_OWNER):
                sys.meta_path.insert(0, AfterImport(_TORCH_MODULE, lambda module: self._install(), _OWNER))
            return
        self._install()

    def _install(self) -> None:
        if self._handle is None and (self.outputs or self.grads) and _TORCH_MODULE in sys.modules:
            api = sys.modules[_TORCH_MODULE]
            self._handle = api.register_module_forward_hook(output_check(self, bad_values=bad_values,
                                                                         caller=_caller))

    def disarm(self) -> None:
        self.outputs = self.grads = False
        remove_after_imports(_OWNER)
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def name_of(self, module) -> str:
        """The module's path under the roots it was armed with (looked up at the hit), else its class."""
        for ref in self._roots:
            root = ref()
            if root is None:
                continue
            if module is root:
                return f"(root {type(module).__name__})"
            names = model_names(root).names_of(module)
            if names:
                return names[0]
        outer = _outermost_module(sys._getframe(1))  # armed before torch: no model was in sight then
        if outer is not None and outer is not module:
            names = model_names(outer).names_of(module)
            if names:
                return names[0]
        return f"({type(module).__name__}, not under the model in sight)"

    def _hit(self, module, path: str, tensor, bad: str, kind: str, frame) -> None:
        self.disarm()
        name = self.name_of(module)
        where = ("torch's module call: `self` is the module, `result` its output;\n  `up` for the caller"
                 if kind == "output" else "the frame running backward()")
        header = (f"nan-break: {name} ({type(module).__name__}) {path} has {bad} values "
                  f"[{tensor_summary(tensor)}]\n  stopped in {where}; nan-break is now off")
        if frame is not None:
            self.stopper(frame, header)


def nan_breaks() -> NanBreak:
    """Usage: ``nan_breaks().arm(roots=[model])``; the engine kept in the session."""
    return SESSION.memory("nan-break", NanBreak)
