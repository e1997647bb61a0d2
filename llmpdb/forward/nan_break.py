"""Pause where a NaN or an Inf first shows in a module's output (or output gradient).

Usage::

    engine = nan_breaks()                     # the process's engine (kept in the session)
    engine.arm(roots=[model])                 # outputs of every module call (a global forward hook)
    engine.arm(roots=[model], blocks=True)    # outputs of the model's blocks only (``nan_blocks``)
    engine.arm(grad=True, roots=[model])      # gradients too: each checked output that requires grad gets a tensor hook
    engine.disarm()                           # every hook off

Two grains; each ``arm`` sets it. By default every module call is checked (a global hook, so modules
created later are checked too): the first hit is the first module whose output is not finite, about
1.25-1.35x a plain forward on a tiny Llama. ``blocks=True`` checks the blocks of the model only
(``check_blocks``: the root, each decoder layer, the embeddings, norms and head between them; a few
hooks per layer instead of one per module), 1.04-1.11x, for a run left armed for hours. The first block
whose output is not finite stops the program in that block's call; the header names the block and any
parameter or buffer inside it that holds a NaN/Inf (read there, nothing is re-run), and from then on only
the modules inside that block are checked, so its next call stops at the first bad module inside. On a
GPU a read is a host sync, so the blocks' checks of device tensors are read together at the end of the
model's forward (``nan_deferred``: one sync per device per forward); such a hit stops in the model's
call, naming the first bad block, and the modules inside are checked from its next call on. What
blocks do not see: a NaN/Inf that a block swallows before its output (torch 2.13's CPU attention kernel
returns finite values for a query holding a NaN). With blocks armed before ``import torch`` or with no
model in sight, the first module called once torch is loaded is taken as the model (a global pre-hook
that removes itself at that call).

How it checks: one reduction per floating-point output tensor, ``t.sum()``, whose result is finite
exactly when every value is (``bad_values``; a non-finite sum is confirmed with ``isfinite(t).all()``).
This reads values: the user asked for it by arming it. The check (``nan_check``) folds away inside a
graph dynamo is compiling. With ``grad`` armed, each checked output that requires grad gets a tensor
hook that checks the gradient with respect to it when backward reaches it (not
``register_full_backward_hook``: that one wraps every module's inputs and outputs in
``BackwardHookFunction``, warns for every module returning a ``ModelOutput`` and breaks in-place ops on
views).

How it stops: through ``SESSION.stopper`` in the frame that called the hook: for an output, torch's
module call (``self`` is the module, ``result`` its output; ``up`` reaches the caller's forward); for a
gradient, the frame that runs ``backward()``. A hit on a single module (fine grain, inside a block, a
block with nothing inside, a gradient) turns everything off: the enclosing modules' outputs hold the
same NaN.
"""

from __future__ import annotations

import cmath
import math
import os
import sys
import weakref

from ..inspect.frames import frame_self
from ..inspect.kinds import is_module
from ..inspect.modules import model_names, unwrap_model
from ..inspect.safe import safe_getattr
from ..inspect.shape_summary import tensor_summary
from ..session import SESSION
from .arming import AfterImport, after_import_pending, remove_after_imports
from .guest_hook import GuestHook
from .nan_blocks import bad_weights, check_blocks, modules_inside
from .nan_check import compiling_function, output_check
from .nan_deferred import DeferredReads

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
        self.by_blocks = False     # the blocks of the roots rather than every module call (a global hook)
        self._handle = None        # the global hook (fine), or the pre-hook that finds the model
        self._block_handles: list = []
        self._hooked: set[int] = set()  # ids of the modules that carry one of our hooks
        self._roots: list[weakref.ref] = []
        self._inside: str | None = None  # after a block's hit: the block whose modules are checked
        self.blocks = 0            # modules hooked (blocks, or the modules inside one block)
        self.checked = 0
        self.defer_on_cpu = False  # blocks read like a GPU's, once per forward, on the CPU too (tests, bench)
        self.deferred: DeferredReads | None = None  # the block checks waiting to be read (blocks only)
        self.messages: list[str] = []  # checks that failed while the program ran (the last few)
        self.failed = 0            # how many failed since the last stop said so

    @property
    def armed(self) -> bool:
        return self._handle is not None or bool(self._block_handles) or self.pending

    @property
    def pending(self) -> bool:
        """Armed before ``import torch``: the hooks go in once torch's module class exists."""
        return self._handle is None and not self._block_handles and after_import_pending(_OWNER)

    def problem(self, text: str) -> None:
        """A check failed (said at the next stop): the last 5 are kept, the rest counted, so a check
        failing at every call of an eight-hour run holds no more memory than one."""
        self.failed += 1
        self.messages.append(text)
        del self.messages[:-5]

    def arm(self, *, grad: bool = False, roots=(), blocks: bool = False) -> None:
        """Check outputs (``grad=False``) or gradients too (``grad=True``) from the next module call on:
        of every module, or of the blocks of ``roots`` (``blocks=True``)."""
        if grad:
            self.grads = True
        else:
            self.outputs = True
        for root in roots:
            if all(ref() is not root for ref in self._roots):
                self._roots.append(weakref.ref(root))
        if blocks != self.by_blocks or self._inside is not None:  # a new grain, or blocks again after a hit
            self._remove_hooks()
            self._inside = None
            self.by_blocks = blocks
        if self._handle is None and _TORCH_MODULE not in sys.modules:  # before `import torch`: armed then
            if not after_import_pending(_OWNER):
                sys.meta_path.insert(0, AfterImport(_TORCH_MODULE, lambda module: self._install(), _OWNER))
            return
        self._install()

    def _new_check(self, deferred=None):
        return output_check(self, bad_values=bad_values, caller=_caller, deferred=deferred)

    def _install(self) -> None:
        if not (self.outputs or self.grads) or _TORCH_MODULE not in sys.modules:
            return
        api = sys.modules[_TORCH_MODULE]
        if not self.by_blocks:
            if self._handle is None:
                self._handle = api.register_module_forward_hook(self._new_check())
            return
        if self._inside is not None:
            return
        check = None
        for ref in self._roots:
            root = ref()
            if root is not None:
                check = self._hook_blocks(root, check)
        if not self._block_handles and self._handle is None:
            self._handle = api.register_module_forward_pre_hook(self._model_finder())

    def _hook_blocks(self, root, check):
        """Hook the blocks of ``root`` (the model a wrapper holds); ``check`` is shared by all blocks, so a
        block returning the tensor its last block returned is not summed twice."""
        inner, _ = unwrap_model(root)
        if self.deferred is None:
            self.deferred = DeferredReads(set(), cpu=self.defer_on_cpu)
        self.deferred.flush_at.add(id(inner))  # its hook is the last of its forward
        for block in check_blocks(inner):
            if id(block) not in self._hooked:
                check = check or self._new_check(self.deferred)
                self._hooked.add(id(block))
                self._block_handles.append(block.register_forward_hook(GuestHook(check, block)))
                self.blocks += 1
        return check

    def _model_finder(self):
        """A global pre-hook: the first module called is the model; its blocks are hooked before its
        forward runs (torch reads the forward hooks after it), and this hook is removed."""
        compiling = compiling_function()

        def find_model(module, args):
            if compiling():
                return None
            handle, self._handle = self._handle, None
            if handle is not None:
                handle.remove()
                self._roots.append(weakref.ref(module))
                self._hook_blocks(module, None)
            return None

        return find_model

    def _remove_hooks(self) -> None:
        for handle in self._block_handles:
            handle.remove()
        self._block_handles, self._hooked, self.blocks = [], set(), 0
        self.deferred = None
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def disarm(self) -> None:
        self.outputs = self.grads = self.by_blocks = False
        self._inside = None
        remove_after_imports(_OWNER)
        self._remove_hooks()

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
        name = self.name_of(module)
        summary = f"{name} ({type(module).__name__}) {path} has {bad} values [{tensor_summary(tensor)}]"
        inside = modules_inside(module) if self.by_blocks and self._inside is None else []
        if kind == "output" and inside:
            header = self._block_hit(module, name, summary, inside)
        elif kind == "output":
            self.disarm()
            header = (f"nan-break: {summary}\n  stopped in torch's module call: `self` is the module, "
                      "`result` its output;\n  `up` for the caller; nan-break is now off")
        else:
            grain = "" if not self.by_blocks or self._inside is not None else (
                "\n  (blocks are checked: the NaN/Inf came back from the modules after this one;\n"
                "  `nan-break --grad` without --blocks checks every module's)")
            self.disarm()
            header = (f"nan-break: {summary}{grain}\n  stopped in the frame running backward(); "
                      "nan-break is now off")
        if frame is not None:
            self.stopper(frame, header)

    def _deferred_hit(self, root, hit, frame) -> None:
        """The first bad block, found when the block checks were read at the end of ``root``'s forward
        (``DeferredReads``): the stop is in the root's call; the block's next call is checked inside."""
        name = self.name_of(hit.module)
        summary = (f"{name} ({type(hit.module).__name__}) {hit.path} is not finite "
                   f"[{tensor_summary(hit.tensor)}]")
        model = type(root).__name__
        read = (f"  found at the end of the {model} forward: the block checks are read together,\n"
                "  once per forward (one host sync per device);")
        stopped = f"  stopped in torch's module call of the {model}: `self` is the model, `result` its output;"
        inside = modules_inside(hit.module) if self._inside is None else []
        if inside:
            header = self._block_hit(hit.module, name, summary, inside, read=read, stopped=stopped)
        else:
            self.disarm()
            header = f"nan-break: {summary}\n{read}\n{stopped}\n  `up` for the caller; nan-break is now off"
        if frame is not None:
            self.stopper(frame, header)

    def _block_hit(self, block, name: str, summary: str, inside: list, *, read: str | None = None,
                   stopped: str = "  stopped in torch's module call: `self` is the block, `result` its output;"
                   ) -> str:
        """The first block whose output is not finite: from now on check only the modules inside it."""
        blocks = self.blocks
        self._remove_hooks()
        self._inside = name
        check = self._new_check()
        for module in inside:
            if id(module) not in self._hooked:
                self._hooked.add(id(module))
                self._block_handles.append(module.register_forward_hook(GuestHook(check, module)))
                self.blocks += 1
        prefix = "" if name.startswith("(") else name + "."
        weights = [f"  {prefix}{line}" for line in bad_weights(block, bad_values)]
        found = (["  inside it, non-finite values already in:"] + weights if weights
                 else ["  inside it, no parameter or buffer holds a NaN/Inf"])
        where = "it" if read is None else name
        return "\n".join([
            f"nan-break: {summary}",
            f"  the first of the {blocks} blocks checked whose output is not finite"
            + (";" if read is None else ","), *([read] if read else []), *found, stopped,
            f"  `up` for the caller; now checking the {len(inside)} modules inside {where} only:",
            "  `c` stops at the first of them with a NaN/Inf in the block's next call (`nan-break off`)"])


def nan_breaks() -> NanBreak:
    """Usage: ``nan_breaks().arm(roots=[model])``; the engine kept in the session."""
    return SESSION.memory("nan-break", NanBreak)
