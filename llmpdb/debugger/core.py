"""The llmpdb debugger: a ``pdb.Pdb`` (pdb++ where available) with model-aware commands.

Usage::

    from llmpdb import Pdb
    Pdb().set_trace()                 # or llmpdb.set_trace() / breakpoint() with the hook installed

Adds to the base debugger: the command mixins of ``llmpdb.commands``; hyphenated command names
(``stack-model`` runs ``do_stack_model``) in parsing, ``help`` and completion on every Python version;
the ``(llmpdb) `` / ``(llmpdb r1) `` prompt; notes printed at each stop; and headless behaviour: when
standard input is not a terminal and runs out, the stop runs a short tour (``LLMPDB_TOUR``, default
``shapes``) and the program continues instead of being killed by pdb's quit-on-EOF.
"""

from __future__ import annotations

import os
import re
import shutil
import sys

from ..base import BASE_NAME, BasePdb
from ..breakpoints.interrupt import SafeInterruptMixin
from ..breakpoints.mixin import FastBreakpointsMixin
from ..commands import COMMAND_MIXINS
from ..commands._command import CommandError
from ..console.prompt import ConsoleMixin
from ..identity import rank_suffix
from ..ranks.mixin import DistributedMixin
from ..headless.tour import HeadlessMixin
from ..headless.policy import HeadlessPolicyMixin
from .pytest_capture import PytestCaptureMixin
from ..inspect.frames import pin_locals, unpin_locals
from ..console.colouring import ColourMixin
from ..render.config_file import config, style_for
from ..render.style import Style
from .recursive import RecursiveDebugMixin
from .restart import RestartMixin
from ..session import SESSION, stop_notes
from .thread_gate import ThreadGateMixin
from .pipeline import StopPipeline
from .quitting import quit_quietly
from .stepping import SteppingMixin

__all__ = ["Pdb"]

_HYPHENATED = re.compile(r"\s*([A-Za-z_]\w*(?:-\w+)+)(?=\s|$)(.*)$", re.S)
# Words that move the program or end the session: typed alone they are the command on every base, even
# where a variable has that name (pdb++'s "smart command" parsing would print the variable: every attention
# forward has a `q`). `p q` and `!q` show the variable; pdb++ still evaluates `q.shape` or `q[0]`.
_RUN_CONTROL = frozenset({"q", "quit", "exit", "c", "cont", "continue", "n", "next", "s", "step", "r",
                          "return", "unt", "until", "j", "jump"})


class _LlmpdbCore:
    """Runtime behaviour shared by every command; mixed in front of the base debugger class."""

    def __init__(self, *args, headless_tour: list[str] | None = None, width: int | None = None,
                 color: bool | None = None, **kwargs):
        kwargs.setdefault("nosigint", False)
        super().__init__(*args, **kwargs)
        self._tour = headless_tour
        self._width = width
        self._color = color
        self._noted_stop = None
        self._stop_lines: set[str] = set()  # what this stop already printed once (message_once)
        self.initial_stop = False  # set by the CLI for the stop on the script's first line
        config = getattr(self, "config", None)  # pdb++ colours source lines even into a pipe
        if config is not None and not self.out_style().color:
            config.highlight = False
            config.use_pygments = False

    # ---- prompt ---------------------------------------------------------------------------------
    @property
    def prompt(self) -> str:
        return f"(llmpdb{rank_suffix()}) "

    @prompt.setter
    def prompt(self, value: str) -> None:  # base classes assign their own prompt: keep ours
        pass

    # ---- context offered to commands --------------------------------------------------------------
    # What a command or another family may ask the debugger, by name. The core answers for a plain debugger;
    # the family that knows better overrides (named beside each): no mixin reads another's private state.
    def nobody_can_answer(self) -> bool:
        """True when a question asked now would get no typed answer (headless/policy.py: the log policy)."""
        return False

    def reads_a_terminal(self) -> bool:
        """True when this stop reads its commands from a terminal (headless/tour.py)."""
        return False

    def policy_streams_in_use(self) -> bool:
        """True when this stop's streams are the headless policy's: a client or the log (headless/policy.py)."""
        return False

    def debug_depth(self) -> int:
        """How many `debug CODE` levels deep this debugger is; 0 for the program's (debugger/recursive.py)."""
        return 0

    def model_roots(self) -> list:
        """The root models names are given from (commands/navigation.py: `root-model`, the stack, the frame)."""
        return []

    def caught_exception(self):
        """The exception this stop was made for by `catch`, else None (commands/catch.py)."""
        return None

    def current_frame(self):
        return getattr(self, "curframe", None)

    def frame_locals(self) -> dict:
        """The current frame's locals: pdb's own mapping, so edits made at the prompt (``!x = 1``) stand."""
        frame = self.current_frame()
        if frame is None:
            return {}
        local_map = getattr(self, "curframe_locals", None)
        if local_map is None or not hasattr(local_map, "keys"):
            local_map = frame.f_locals
        return dict(local_map)

    def _pin_current_locals(self) -> None:
        """Let every inspection of the current frame read pdb's locals mapping, not the frame afresh."""
        local_map = getattr(self, "curframe_locals", None)
        if self.current_frame() is not None and hasattr(local_map, "keys"):
            pin_locals(self.current_frame(), local_map)

    def message_once(self, key: str, text: str | None = None) -> None:
        """Usage: ``self.message_once(note)``; print ``text`` (default ``key``) unless this stop already did."""
        if key in self._stop_lines:
            return
        self._stop_lines.add(key)
        self.message(key if text is None else text)

    def frame_globals(self) -> dict:
        frame = self.current_frame()
        return frame.f_globals if frame is not None else {}

    def stack_frames(self) -> list:
        return list(getattr(self, "stack", []) or [])

    def current_index(self) -> int:
        return getattr(self, "curindex", 0)

    def eval_in_frame(self, expr: str):
        expr = (expr or "").strip()
        if not expr:
            raise CommandError("an expression is required")
        frame = self.current_frame()
        if frame is None:
            raise CommandError("no frame to evaluate in")
        try:
            code = compile(expr, "<llmpdb>", "eval")  # eval(str) would mark a KeyboardInterrupt: see postcmd
            return eval(code, frame.f_globals, self.frame_locals())
        except SyntaxError as exc:
            raise CommandError(f"invalid expression {expr!r}: {exc.msg}") from None
        except Exception as exc:
            raise CommandError(f"cannot evaluate {expr!r}: {type(exc).__name__}: {exc}") from None

    def out_width(self) -> int:
        if self._width:
            return self._width
        if config().width:
            return config().width
        if os.environ.get("COLUMNS", "").isdigit():
            return max(40, int(os.environ["COLUMNS"]))
        return max(40, shutil.get_terminal_size((100, 24)).columns)

    def out_style(self) -> Style:
        return style_for(self.stdout, self._color)

    def out_is_terminal(self) -> bool:
        """Usage: ``self.out_is_terminal()``; the debugger talks to a terminal here (not an attached client,
        not a log file): a progress bar on standard error is then seen beside its output."""
        try:
            return bool(self.stdout.isatty())
        except Exception:  # closed, or a stream without isatty
            return False

    # ---- hyphenated command names -----------------------------------------------------------------
    def _llmpdb_command_name(self, word: str) -> str | None:
        name = word.replace("-", "_")
        return name if "-" in word and callable(getattr(self, "do_" + name, None)) else None

    def parseline(self, line):
        word = line.strip()
        if word in _RUN_CONTROL and callable(getattr(self, "do_" + word, None)):
            return word, "", word
        match = _HYPHENATED.match(line)
        if match:
            name = self._llmpdb_command_name(match.group(1))
            if name:
                return name, match.group(2).strip(), line
        return super().parseline(line)

    def _llmpdb_names(self) -> list[str]:
        names = set()
        for klass in type(self).__mro__:
            for attr, value in vars(klass).items():
                if attr.startswith("do_") and getattr(value, "llmpdb_command", None):
                    names.add(attr[3:].replace("_", "-"))
        return sorted(names)

    def completenames(self, text, *ignored):
        """Usage: ``completenames("sta")``; command names (3.13's pdb wants line, begidx and endidx too:
        they are filled in when not given)."""
        ours = self._llmpdb_names()
        ignored = ignored or (text, 0, len(text))
        base = {n for n in super().completenames(text, *ignored) if n.replace("_", "-") not in ours}
        return sorted(base | {n for n in ours if n.startswith(text)})

    def set_trace(self, frame=None, *args, **kwargs):
        """Stop at the next line of ``frame`` (the caller), not inside whatever Python runs first.

        pdb steps into the first event anywhere, which under torch.compile is dynamo's own machinery.
        The base ``set_trace`` asks for a step just before installing the trace function; while it runs,
        ``set_step``/``set_stepinstr`` are redirected to "next line of ``frame``"."""
        if frame is None:
            frame = sys._getframe().f_back
        # This instance is reused across stops: with breakpoints set, its trace function is still active
        # and would trace (and stop in) its own reset(). Switch it off; the base set_trace installs it again.
        sys.settrace(None)
        self._llmpdb_trace_frame = frame
        try:
            super().set_trace(frame, *args, **kwargs)
        finally:
            self._llmpdb_trace_frame = None

    def set_step(self):
        frame = getattr(self, "_llmpdb_trace_frame", None)
        if frame is None:
            return super().set_step()
        self._stop_at_next_line_of(frame)
        return None

    def set_stepinstr(self):  # Python 3.13+: bdb.set_trace asks for an instruction step
        frame = getattr(self, "_llmpdb_trace_frame", None)
        if frame is None:
            return super().set_stepinstr()
        self._stop_at_next_line_of(frame)
        return None

    def _stop_at_next_line_of(self, frame) -> None:
        """``set_next(frame)`` by plain assignments: a trace function may already be active (breakpoints
        set earlier), and any Python call made here would be traced and stop inside bdb."""
        self.stopframe = frame
        self.returnframe = None
        self.quitting = False
        self.stoplineno = 0
        if getattr(self, "trace_opcodes", False):  # 3.13: leave instruction stepping on every frame
            self._set_trace_opcodes(False)

    def set_quit(self):
        """``q``: pdb's quit, and a BdbQuit the program leaves uncaught ends it in one line (``quitting``)."""
        super().set_quit()
        quit_quietly()

    # ---- stops --------------------------------------------------------------------------------------
    def preloop(self):
        super().preloop()
        self._keep_hyphens_in_completion()
        self._pin_current_locals()
        frame = self.current_frame()
        if frame is None or self._noted_stop == id(frame):
            return
        self._noted_stop = id(frame)
        self._stop_lines = set()
        SESSION.stop += 1
        if self.initial_stop:
            return
        for line in stop_notes(frame, self):
            self.message_once(line)

    def precmd(self, line):
        self._pin_current_locals()  # `up`/`down` changed the current frame: pin the new one
        return super().precmd(line)

    def postcmd(self, stop, line):
        # CPython marks a KeyboardInterrupt raised inside eval()/exec() of a *string* (pdb's `p boom()`) as
        # unhandled even when pdb catches it, and the process then ends by SIGINT (status 130) however the
        # program exits; the next string eval that succeeds clears the mark.
        eval("None")
        return super().postcmd(stop, line)

    def stop_state(self, stop, proceed):
        """Stop stage ``stop state``: after the stop, forget its notes, the first-line flag, pinned locals."""
        try:
            return proceed()
        finally:
            self._noted_stop = None
            self.initial_stop = False
            unpin_locals()

    def _keep_hyphens_in_completion(self) -> None:
        """pdb drops '-' from GNU readline's word delimiters; pdb++'s pyrepl readline keeps it, which would
        complete `stack-<TAB>` as the word after the hyphen."""
        readline = getattr(getattr(getattr(self, "fancycompleter", None), "config", None), "readline", None)
        getter = getattr(readline, "get_completer_delims", None)
        if getter is None:
            return
        try:
            delims = getter()
            if "-" in delims:
                readline.set_completer_delims(delims.replace("-", ""))
        except (AttributeError, TypeError, ValueError) as exc:
            self.message(f"llmpdb: cannot adjust completion for hyphenated commands: {exc}")


def _build_class() -> type:
    """``LLMPDB_FAST_BREAKPOINTS=0`` leaves out the fast breakpoint engine: pdb's own tracing then runs."""
    engine = ((SafeInterruptMixin,) if os.environ.get("LLMPDB_FAST_BREAKPOINTS", "1") == "0"
              else (FastBreakpointsMixin,))
    bases = (DistributedMixin, *COMMAND_MIXINS, *engine, SteppingMixin, RecursiveDebugMixin, RestartMixin,
             ThreadGateMixin, PytestCaptureMixin, HeadlessPolicyMixin, HeadlessMixin, ConsoleMixin, ColourMixin,
             _LlmpdbCore, StopPipeline, BasePdb)
    return type("Pdb", bases, {"__module__": __name__, "__qualname__": "LlmpdbPdb",
                               "__doc__": f"llmpdb debugger on the {BASE_NAME} base."})


Pdb = _build_class()
