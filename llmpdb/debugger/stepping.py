"""Stepping that lands in the model's code, and a stack without the debugger's own frames.

Usage (at the prompt)::

    s / step             step into the next call or line; plumbing is stepped through (see below)
    step-all             one step that stops at the very next line or call, plumbing included
    step-forward / sf    continue to the next module ``forward`` that starts; says which module it is

``LLMPDB_STEP_PLUMBING=1`` makes every ``s`` a ``step-all``. Plumbing (``step_plumbing`` in
``llmpdb/inspect/frame_kinds.py``) is skipped as pdb's ``skip=`` skips modules: torch, transformers
outside ``transformers/models/``, accelerate, the standard library, imports of installed packages, and
their functions when plumbing calls them; a module's ``forward`` always stops. ``s`` from a frame
that is itself plumbing steps through plumbing too (you asked to be there).

Never shown and never stopped in: llmpdb's own frames (the launcher ``cli.py``, the fast engine's ``run``,
``hooks.py`` behind ``breakpoint()``), and bdb/pdb's. The stack starts, as pdb's does for a program it runs,
at bdb's ``run`` frame when there is one, so ``[N]``, ``where`` and ``frame N`` number frames the same way
with or without the fast engine, at a ``breakpoint()`` and at a ``b`` breakpoint. pdb++'s ``hf_unhide``
shows every frame again.
"""

from __future__ import annotations

import os

from ..commands._command import CommandError, command
from ..commands.navigation import user_root
from ..inspect.debugger_frames import is_debugger_frame, program_traceback, visible_stack
from ..inspect.frame_kinds import is_module_forward, step_plumbing

__all__ = ["SteppingMixin", "is_debugger_frame", "program_traceback", "visible_stack", "STEP_SKIP", "STEP_ALL", "STEP_FORWARD"]

STEP_SKIP, STEP_ALL, STEP_FORWARD = "skip", "all", "forward"

def _forward_label(frame) -> str:
    """``model.layers.0.self_attn (LlamaAttention)``, or the class alone when the frame runs the root."""
    from ..inspect.modules import frame_stack, module_frames  # off the first prompt's imports

    rows = module_frames(frame_stack(frame), user_root())
    if not rows or rows[-1].module is None:
        return "?"
    row = rows[-1]
    return f"{row.qualname} ({row.class_name})" if row.qualname else f"{row.class_name} (root)"


class SteppingMixin:
    """``stop_here`` that skips plumbing and llmpdb, ``get_stack`` without llmpdb's frames, ``step-all``, ``sf``."""

    _llmpdb_step_mode = STEP_SKIP
    _llmpdb_sf_running: tuple = ()

    @staticmethod
    def _default_step_mode() -> str:
        return STEP_ALL if os.environ.get("LLMPDB_STEP_PLUMBING", "") not in ("", "0") else STEP_SKIP

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._llmpdb_step_mode = self._default_step_mode()

    # ---- where pdb may stop ----------------------------------------------------------------------------
    def stop_here(self, frame):
        if is_debugger_frame(frame) and not self._typed_code(frame):
            return False
        if self.stopframe is None and not getattr(self, "_wait_for_mainpyfile", False):
            mode = self._llmpdb_step_mode  # a step: pdb would stop at the next event anywhere
            if mode == STEP_FORWARD:
                return is_module_forward(frame) and all(frame is not f for f in self._llmpdb_sf_running)
            if mode == STEP_SKIP and step_plumbing(frame):
                return False
        return super().stop_here(frame)

    def _typed_code(self, frame) -> bool:
        """The string a recursive debugger runs is the code typed after ``debug``, not a launcher."""
        return self.debug_depth() > 0 and frame.f_code.co_filename == "<string>"

    def user_call(self, frame, argument_list):
        if (self._llmpdb_step_mode == STEP_FORWARD and not getattr(self, "_wait_for_mainpyfile", False)
                and self.stop_here(frame)):
            self.message(f"--Forward-- {_forward_label(frame)}")
            self.interaction(frame, None)
            return None
        return super().user_call(frame, argument_list)

    def stop_step_request(self, stop, proceed):
        """Stop stage ``step request``: a step request (``s``, ``step-all``, ``sf``) lasts until the next stop."""
        self._llmpdb_step_mode = self._default_step_mode()
        self._llmpdb_sf_running = ()
        return proceed()

    # ---- the stack ---------------------------------------------------------------------------------------
    def get_stack(self, f, t):
        stack, index = super().get_stack(f, t)
        if callable(getattr(super(), "compute_stack", None)):  # pdb++: filtered in compute_stack
            return stack, index
        return visible_stack(stack, index)

    def compute_stack(self, fullstack, idx=None):
        """pdb++ only: its hidden frames, then llmpdb's (``hf_unhide`` shows them all)."""
        stack, index = super().compute_stack(fullstack, idx)
        if getattr(self, "show_hidden_frames", False):
            return stack, index
        return visible_stack(stack, index)

    # ---- commands ----------------------------------------------------------------------------------------
    def do_step(self, arg):
        """s(tep)
        Execute the current line, stop at the first possible occasion (in a function that is called or
        in the current function). Plumbing (torch, transformers outside its models, accelerate,
        functools, contextlib...) is stepped through: `s` on `outputs = model(**inputs)` stops in the
        model's forward. `step-all` (or LLMPDB_STEP_PLUMBING=1) stops in plumbing too."""
        frame = getattr(self, "curframe", None)
        if frame is not None and step_plumbing(frame):  # already in plumbing: the user wants to see it
            self._llmpdb_step_mode = STEP_ALL
        return super().do_step(arg)

    do_s = do_step

    @command
    def do_step_all(self, arg):
        """step-all
        Like `s`, but stop at the very next line or call anywhere: in torch, transformers, accelerate and
        the standard library too (llmpdb's own frames are never shown). LLMPDB_STEP_PLUMBING=1 makes
        every `s` a step-all.
        Example: step-all"""
        if arg.strip():
            raise CommandError("takes no argument")
        self._llmpdb_step_mode = STEP_ALL
        return super().do_step("")

    @command
    def do_step_forward(self, arg):
        """step-forward (sf)
        Continue to the next module forward that starts; any nn.Module's forward (a decoder layer, an
        attention, a Linear) stops as it starts (where `s` shows `--Call--`), naming the module:
        `--Forward-- model.layers.0.self_attn (LlamaAttention)`. Breakpoints on the way stop as usual.
        Example: sf"""
        if arg.strip():
            raise CommandError("takes no argument")
        frame = self.stack[-1][0] if getattr(self, "stack", None) else getattr(self, "curframe", None)
        running = []
        while frame is not None:
            running.append(frame)
            frame = frame.f_back
        self._llmpdb_step_mode = STEP_FORWARD
        self._llmpdb_sf_running = tuple(running)
        self.set_step()
        return 1

    do_sf = do_step_forward
