"""The per-module-call check of ``nan-break``: one closure, the global forward hook, kept cheap.

Usage::

    hook = output_check(engine, bad_values=bad_values, caller=_caller)   # engine: a NanBreak
    handle = register_module_forward_hook(hook)

Measured on a tiny Llama (36 module calls, 41 output tensors per forward, about 1.2 ms of CPU), every
microsecond per call is 3 % of the forward, and a global hook that does nothing already costs 5 %
(torch leaves its hook-free fast path). So the hot path does the least that keeps the answer exact:

- no ``dynamo.disable`` wrapper (2 µs a call): the first statement is ``torch.compiler.is_compiling()``,
  a constant True inside a graph dynamo traces, so the hook folds away there, as the pending watch does;
- a plain ``torch.Tensor`` output skips the walk over containers;
- one reduction and one read per floating tensor, ``t.sum().item()``, finite exactly when ``s - s == 0``
  (a NaN or an Inf anywhere makes the sum NaN or infinite; complex sums too); ``detach()`` only for a
  tensor that requires grad; a non-finite sum goes to ``bad_values`` (which confirms it, as a sum of
  f16 values can overflow);
- a tensor that is the very one the previous call checked, at the same version (a module returning
  its last child's output: ``mlp`` -> ``down_proj``, the model -> its ``lm_head``), is not summed
  again nor hooked again (the child's gradient hook, registered first, runs first and names the same
  module as before): one weak reference and a version read instead of a pass over the logits;
- a gradient hook is a plain closure (no ``dynamo.disable`` wrapper built for each output), folded
  away the same way under compiled autograd.
"""

from __future__ import annotations

import sys
import weakref

from ..inspect.shape_summary import named_tensor_leaves

__all__ = ["output_check", "compiling_function"]


def compiling_function(found=None):
    """``torch.compiler.is_compiling`` when loaded, else a function that looks for it at each call
    (``found(func)`` is told once it is there, to call it directly from then on)."""
    compiler = sys.modules.get("torch.compiler")
    func = getattr(compiler, "is_compiling", None) if compiler is not None else None
    if callable(func):
        return func

    def late() -> bool:
        loaded = sys.modules.get("torch.compiler")
        check = getattr(loaded, "is_compiling", None) if loaded is not None else None
        if not callable(check):
            return False
        if found is not None:
            found(check)
        return bool(check())

    return late


def _cuda_capturing() -> bool:
    """Whether the current CUDA stream is capturing a graph (asked for CUDA tensors only)."""
    cuda = getattr(sys.modules.get("torch"), "cuda", None)
    capturing = getattr(cuda, "is_current_stream_capturing", None)
    return bool(capturing()) if callable(capturing) else False


def output_check(engine, *, bad_values, caller, deferred=None):
    """The forward hook of ``engine`` (global, or on each block): checks each output tensor, registers
    gradient checks; ``bad_values(t)`` confirms and counts a non-finite sum, ``caller(frame)`` is the
    frame to stop in. With ``deferred`` (a ``DeferredReads``; blocks only), a device tensor's check is
    queued there and read at the root's hook, the last of a forward (``engine._deferred_hit``)."""
    tensor_type = sys.modules["torch"].Tensor
    last = [None, -1]  # a weak reference to the tensor checked last, its version
    compiling = [None]
    compiling[0] = compiling_function(lambda func: compiling.__setitem__(0, func))

    def visit(module, path, t, depth: int) -> bool:
        """Check one output tensor; True when it was found bad (and the stop was made). ``path`` is a
        name, or a tuple index made into one only at a hit."""
        ref = last[0]
        if ref is not None and ref() is t and t._version == last[1]:
            return False  # the previous module's output, unchanged: checked, its gradient hooked
        if not (t.is_floating_point() or t.is_complex()) or t.is_meta:
            return False
        grad = t.requires_grad
        if engine.outputs:
            if not t.is_cpu and t.is_cuda and _cuda_capturing():
                return False  # a CUDA graph is being captured: a read of a value would end the capture
            engine.checked += 1
            if deferred is not None and deferred.wanted(t):
                deferred.add(module, path if isinstance(path, str) else f"output[{path}]",
                             t.detach() if grad else t)
                total = 0.0
            else:
                total = (t.detach() if grad else t).sum().item()
            if total - total != 0:
                bad = bad_values(t)
                if bad is not None:
                    name = path if isinstance(path, str) else f"output[{path}]"
                    engine._hit(module, name, t, bad, "output", caller(sys._getframe(depth)))
                    return True
        if grad and engine.grads:
            t.register_hook(grad_check(module, path if isinstance(path, str) else f"output[{path}]"))
        if t.is_inference():  # inference tensors keep no version counter
            last[0] = None
        else:
            last[0], last[1] = weakref.ref(t), t._version
        return False

    def grad_check(module, path):
        ref = weakref.ref(module)

        def on_grad(grad):
            if compiling[0]() or not engine.grads or grad is None:
                return None
            try:
                bad = bad_values(grad)
                if bad is not None and ref() is not None:
                    engine._hit(ref(), f"grad of {path}", grad, bad, "gradient", caller(sys._getframe(1)))
            except Exception as exc:
                engine.problem(f"nan-break gradient check failed: {type(exc).__name__}: {exc}")
            return None

        return on_grad

    def hook(module, args, output):
        if compiling[0]():  # constant True in a graph dynamo traces: nothing below is traced
            return None
        try:
            kind = type(output)
            if kind is tensor_type:
                visit(module, "output", output, 2)
            elif kind is tuple and len(output) < 8:  # (hidden, attention) or (cos, sin): no walk, no names
                for i, t in enumerate(output):
                    if type(t) is tensor_type:
                        if visit(module, i, t, 2):
                            return None
                    elif t is not None and _leaf_walk(module, t, f"output[{i}]"):
                        return None
            else:
                _leaf_walk(module, output, "output")
            if deferred is not None and deferred.due(module):
                hit = deferred.first_bad()
                if hit is not None:
                    engine._deferred_hit(module, hit, caller(sys._getframe(1)))
        except Exception as exc:  # a check must never become an error in the user's forward
            engine.problem(f"nan-break check failed in {type(module).__name__}: {type(exc).__name__}: {exc}")
        return None

    def _leaf_walk(module, value, base) -> bool:
        for path, t in named_tensor_leaves(value, base):
            if isinstance(t, tensor_type) and visit(module, path, t, 3):
                return True
        return False

    return hook
