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

import bdb
import os
import types

from ..commands._command import CommandError, command
from ..commands.navigation import user_root
from ..inspect.frame_kinds import is_module_forward, step_plumbing
from ..inspect.modules import frame_stack, module_frames

__all__ = ["SteppingMixin", "is_debugger_frame", "program_traceback", "visible_stack", "STEP_SKIP", "STEP_ALL", "STEP_FORWARD"]

STEP_SKIP, STEP_ALL, STEP_FORWARD = "skip", "all", "forward"

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_BDB_FILE = bdb.__file__
_RUN_NAMES = frozenset({"run", "runeval", "runctx", "runcall"})
_STDLIB_DIR = os.path.dirname(os.path.abspath(bdb.__file__))
_DEBUGGER_FILES = frozenset(os.path.join(_STDLIB_DIR, name) for name in ("bdb.py", "pdb.py", "cmd.py"))
_VERDICTS: dict[str, bool] = {}  # file name -> a debugger file (llmpdb, bdb, pdb, pdb++)


def _debugger_file(filename: str) -> bool:
    verdict = _VERDICTS.get(filename)
    if verdict is None:
        base = os.path.basename(filename)
        verdict = (filename.startswith(_PACKAGE_DIR) or filename in _DEBUGGER_FILES
                   or base == "pdbpp.py" or f"{os.sep}_pdbpp_path_hack{os.sep}" in filename)
        _VERDICTS[filename] = verdict
    return verdict


def is_debugger_frame(frame) -> bool:
    """Usage: ``is_debugger_frame(frame)``; llmpdb's, bdb's, pdb's frames and the string bdb runs."""
    filename = frame.f_code.co_filename
    if filename == "<string>":
        caller = frame.f_back
        return caller is not None and caller.f_code.co_filename == _BDB_FILE
    return _debugger_file(filename)


def program_traceback(tb):
    """Usage: ``traceback.print_exception(type(e), e, program_traceback(e.__traceback__))``; the traceback
    without llmpdb's, bdb's and pdb's entries (the launcher a user never wrote); its last entry always stays."""
    entries = []
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    kept = [t for t in entries[:-1] if not is_debugger_frame(t.tb_frame)] + entries[-1:]
    chain = None
    for entry in reversed(kept):
        chain = types.TracebackType(chain, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return chain


def _llmpdb_frame(frame) -> bool:
    return frame.f_code.co_filename.startswith(_PACKAGE_DIR)


def visible_stack(stack: list, index: int) -> tuple[list, int]:
    """Usage: ``stack, index = visible_stack(stack, index)``; drop llmpdb's frames and what is above bdb's
    ``run`` (the launcher). The frame at ``index`` always stays."""
    if not stack:
        return stack, index
    start = 0
    for i, (frame, _) in enumerate(stack[: index + 1]):
        code = frame.f_code
        if code.co_name in _RUN_NAMES and code.co_filename == _BDB_FILE:
            start = i
    kept = [i for i in range(start, len(stack)) if i == index or not _llmpdb_frame(stack[i][0])]
    return [stack[i] for i in kept], kept.index(index) if index in kept else len(kept) - 1


def _forward_label(frame) -> str:
    """``model.layers.0.self_attn (LlamaAttention)``, or the class alone when the frame runs the root."""
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
        return getattr(self, "_llmpdb_depth", 0) > 0 and frame.f_code.co_filename == "<string>"

    def user_call(self, frame, argument_list):
        if (self._llmpdb_step_mode == STEP_FORWARD and not getattr(self, "_wait_for_mainpyfile", False)
                and self.stop_here(frame)):
            self.message(f"--Forward-- {_forward_label(frame)}")
            self.interaction(frame, None)
            return None
        return super().user_call(frame, argument_list)

    def interaction(self, *args, **kwargs):
        self._llmpdb_step_mode = self._default_step_mode()  # a step request lasts until the next stop
        self._llmpdb_sf_running = ()
        return super().interaction(*args, **kwargs)

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
