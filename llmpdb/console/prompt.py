"""Line editing at the ``(llmpdb)`` prompt on a terminal: prompt_toolkit, with history and completion.

Usage::

    class Pdb(ConsoleMixin, ..., BasePdb): ...     # cmdloop reads its lines through the console
    console = terminal_console()                   # None where prompt_toolkit cannot run (see below)
    line = console.read("(llmpdb) ", lambda: CompletionContext(...))   # EOFError on Ctrl-D, like input()

On a terminal the prompt has emacs keys, Ctrl-R history search, Up/Down through a history kept across
sessions in ``$XDG_STATE_HOME/llmpdb/history`` (default ``~/.local/state/llmpdb/history``; the folder is
created 0700, the file 0600; the last ``LLMPDB_HISTORY_SIZE`` entries are kept, else the config file's ``history_size``, default
1000), TAB
completion (``llmpdb.console.completion``) and, before Python 3.13, multi-line statements: a line such as
``for i in range(3):`` continues at a ``...`` prompt until an empty line (3.13's pdb reads its own
continuation lines). Ctrl-C at the prompt raises ``KeyboardInterrupt`` and Ctrl-D on an empty line
``EOFError``, as ``input()`` does, so pdb's meanings stay.

The base debugger's plain reads (``input()`` with readline, or ``stdin.readline()``) stay where the console
cannot run: ``LLMPDB_PROMPT=plain``, ``TERM=dumb``, standard input or output not a terminal (a pipe, a file,
an attached client's stream, the headless policies), a debugger given its own streams, a recursive
``debug`` session, a rank of a distributed job (ranks share one terminal), or prompt_toolkit not installed.
prompt_toolkit runs in a thread of its own while the program waits, so the program's own asyncio event
loop (running or only set) is left as it is.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TYPE_CHECKING, Callable

from .history import DEFAULT_HISTORY_SIZE, history_path, history_size
from .history import open_history as _open_history
from .deferred import DeferredConsole, editor_loaded
from ..headless.streams import stream_is_terminal

if TYPE_CHECKING:  # the completion module loads with the first console (start-up stays light)
    from .completion import CompletionContext

__all__ = ["Console", "ConsoleMixin", "terminal_console", "plain_reason", "history_path", "history_size",
           "DEFAULT_HISTORY_SIZE", "continues"]

_BLOCK_WORDS = frozenset({"if", "for", "while", "def", "class", "with", "try", "async", "elif", "else",
                          "except", "finally", "match"})
_NATIVE_CONTINUATION = sys.version_info >= (3, 13)  # pdb's default() reads continuation lines itself


def continues(text: str) -> bool:
    """Usage: ``continues("for i in x:")`` -> True; whether Enter opens a continuation line."""
    if _NATIVE_CONTINUATION:
        return False
    lines = text.split("\n")
    if len(lines) > 1:
        return bool(lines[-1].strip())
    first = lines[0].strip().lstrip("!").strip()
    word = first.split(None, 1)[0].rstrip(":") if first else ""
    return word in _BLOCK_WORDS and first.endswith(":")


def plain_reason(stdin=None, stdout=None) -> str | None:
    """Usage: ``plain_reason(sys.stdin, sys.stdout)``; why the console cannot run here, None when it can."""
    if os.environ.get("LLMPDB_PROMPT", "").strip().lower() == "plain":
        return "LLMPDB_PROMPT=plain"
    if os.environ.get("TERM", "") == "dumb":
        return "TERM=dumb"
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    if not (stream_is_terminal(stdin) and stream_is_terminal(stdout)):
        return "standard input or output is not a terminal"
    if not editor_loaded():  # found without importing it (``llmpdb.console.deferred``)
        import importlib.util

        try:
            found = importlib.util.find_spec("prompt_toolkit") is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return "prompt_toolkit is not installed"
    return None


def _completer(console: "Console"):
    from prompt_toolkit.completion import Completer, Completion

    class _LlmpdbCompleter(Completer):
        def get_completions(self, document, complete_event):
            provider = console.context
            if provider is None:
                return
            try:
                context = provider()
            except Exception:  # the frame's state could not be gathered: nothing to offer
                return
            from .completion import completions

            for candidate in completions(document.current_line_before_cursor, context):
                yield Completion(candidate.text, candidate.start, display=candidate.display)

    return _LlmpdbCompleter()


def _key_bindings():
    from prompt_toolkit.key_binding import KeyBindings

    bindings = KeyBindings()

    @bindings.add("enter")
    def _enter(event) -> None:
        buffer = event.current_buffer
        document = buffer.document
        if document.is_cursor_at_the_end and continues(document.text):
            last = document.text.split("\n")[-1]
            indent = last[: len(last) - len(last.lstrip())] + ("    " if last.rstrip().endswith(":") else "")
            buffer.insert_text("\n" + indent)
            return
        if "\n" in document.text:
            buffer.text = document.text.rstrip()
        buffer.validate_and_handle()

    from .suspend import can_stop_job

    if can_stop_job():
        @bindings.add("c-z")
        def _stop_job(event) -> None:  # over prompt_toolkit's own, which could draw before the stop
            from prompt_toolkit.application import run_in_terminal
            from .suspend import stop_job

            run_in_terminal(stop_job)

    return bindings


class Console:
    """One prompt_toolkit session on this process's terminal (``read`` behaves as ``input()``)."""

    def __init__(self, stdin, stdout):
        from prompt_toolkit import PromptSession
        from .keys import coalescing_input
        from prompt_toolkit.output.vt100 import Vt100_Output
        from prompt_toolkit.styles import Style

        self.streams = (stdin, stdout)
        self.context: Callable[[], CompletionContext] | None = None
        output = Vt100_Output.from_pty(stdout, term=os.environ.get("TERM"))
        output.enable_cpr = False  # no cursor-position queries: a terminal that does not answer costs nothing
        self.session = PromptSession(
            input=coalescing_input(self._own_input(stdin)), output=output, history=_open_history(),
            completer=_completer(self),
            complete_while_typing=False, multiline=True, key_bindings=_key_bindings(),
            prompt_continuation=lambda width, line, wrap: "...".ljust(width), enable_history_search=False,
            reserve_space_for_menu=6, style=Style.from_dict(_COLOUR_STYLE), enable_suspend=False)
        # While it reads, prompt_toolkit puts its own pdb behind breakpoint() (when the hook is Python's
        # default): another thread's breakpoint() would open a plain pdb beside this stop instead of waiting
        # for its turn at llmpdb's gate. The program's breakpoint() stays what it was.
        if callable(getattr(self.session.app, "_enable_breakpointhook", None)):
            self.session.app._enable_breakpointhook = contextlib.nullcontext

    @staticmethod
    def _own_input(stdin):
        """A stream of our own on standard input's descriptor: the program may close ``sys.stdin``
        (``exit()`` does, even inside ``debug exit(4)``) while the terminal stays open."""
        try:
            return os.fdopen(os.dup(stdin.fileno()), "r", encoding=getattr(stdin, "encoding", None) or "utf-8",
                             errors="replace")
        except (OSError, ValueError, AttributeError):
            return stdin

    def read(self, prompt: str, context: Callable[[], CompletionContext] | None = None,
             colour: bool = True, drawn: bool = False) -> str:
        """Usage: ``console.read("(llmpdb) ", colour=False)``; the line; EOFError (Ctrl-D), KeyboardInterrupt
        (Ctrl-C). With ``colour`` False (``NO_COLOR``, the config's ``color = "never"``) the editor writes no
        colour code: only attribute resets and reverse video for the completion menu's current entry. With
        ``drawn`` the prompt's bytes are on the terminal already (``llmpdb.console.deferred``): the editor
        draws it over them in its split form, so they reach the terminal once for this read too."""
        from prompt_toolkit.output import ColorDepth
        from prompt_toolkit.styles import Style

        self.context = context
        depth = None if colour else ColorDepth.DEPTH_1_BIT
        style = _COLOUR_STYLE if colour else _MONOCHROME_STYLE
        try:
            first_render = self.session.app.render_counter + 1 if drawn else -1
            line = self.session.prompt(lambda: _prompt_text(prompt, first_render), in_thread=True,
                                       color_depth=depth, style=Style.from_dict(style))
        finally:
            self.context = None
        self._give_back_typeahead()
        return line

    def _give_back_typeahead(self) -> None:
        """Keys typed after the line (``c`` Enter, then the program's input) reach the program (module
        ``console_typeahead``)."""
        from .typeahead import give_back_typeahead

        try:
            give_back_typeahead(self.session.input, self.streams[0].fileno())
        except Exception:  # never let this cost the line that was read
            pass


def _prompt_text(prompt: str, drawn_until: int = -1) -> list[tuple[str, str]]:
    """The prompt as prompt_toolkit draws it. The bytes ``(llmpdb) `` reach the terminal once per read, when
    it waits for input, as with readline: scripts driving the debugger (pexpect, expect) wait for them. A
    styled prompt keeps its trailing space (an unstyled one is drawn as a cursor move), and the final
    redraw of an accepted line, or the first draw of a prompt already on the terminal (the first read's,
    written before the editor loaded: renders up to ``drawn_until``), writes the space after an invisible
    attribute reset. A full redraw later (after Ctrl-Z and ``fg``) writes the bytes again, as readline does."""
    from prompt_toolkit.application import get_app_or_none

    app = get_app_or_none()
    if app is not None and (app.is_done or app.render_counter <= drawn_until):
        return [("class:llmpdb-prompt", prompt.rstrip(" ")), ("[ZeroWidthEscape]", "\x1b[0m"),
                ("", prompt[len(prompt.rstrip(" ")):])]
    return [("class:llmpdb-prompt", prompt)]


_COLOUR_STYLE = {"llmpdb-prompt": "fg:ansidefault"}
_MONOCHROME_STYLE = {"llmpdb-prompt": "fg:ansidefault",  # 1-bit depth writes no colour code for it
                     "completion-menu.completion.current": "reverse",
                     "completion-menu.meta.completion.current": "reverse"}
_CONSOLE: list[Console | DeferredConsole] = []


def terminal_console(stdin=None, stdout=None) -> Console | DeferredConsole | None:
    """Usage: ``terminal_console()``; the process's console on its terminal, or None (``plain_reason``).
    Before prompt_toolkit is imported, a ``DeferredConsole`` that draws the first prompt at once and loads the
    editor while the user types (``llmpdb.console.deferred``)."""
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    if plain_reason(stdin, stdout) is not None:
        return None
    if _CONSOLE and _CONSOLE[0].streams == (stdin, stdout):
        return _CONSOLE[0]
    if not editor_loaded():
        console = DeferredConsole(stdin, stdout, Console)
        _CONSOLE[:] = [console]
        return console
    try:
        console = Console(stdin, stdout)
    except Exception:  # prompt_toolkit refused this terminal: the plain read works
        return None
    _CONSOLE[:] = [console]
    return console


class ConsoleMixin:
    """``cmdloop`` reads each line through the terminal console when this stop can use it."""

    def _stop_console(self) -> Console | None:
        if not self.use_rawinput or self.debug_depth() or self.policy_streams_in_use():
            return None
        if self.stdin not in (None, sys.stdin) or self.stdout not in (None, sys.stdout):
            return None
        from ..identity import current_rank

        if current_rank() is not None:
            return None
        return terminal_console()

    def _custom_completer(self):
        """pdb++ sets up its readline completer around each stop (fancycompleter, which imports pyrepl: ~5 ms
        before the first prompt); a stop read by the terminal console completes through prompt_toolkit, so
        none is set up there. Other stops (plain, remote, ranks, ``debug``) keep pdb++'s."""
        if self._stop_console() is not None:
            return contextlib.nullcontext()
        return super()._custom_completer()

    def precmd(self, line):
        if not self.use_rawinput and self.stdin is not None:
            from .plain import CUT_MESSAGE, cut_by_terminal

            if cut_by_terminal(line, self.stdin):  # a line the terminal cut is not run
                self.error(CUT_MESSAGE)
                self.lastcmd = ""  # and the empty line that replaces it repeats nothing
                line = ""
        return super().precmd(line)

    def _completion_context(self) -> CompletionContext:
        from .completion import CompletionContext

        commands = {}
        for name in self.completenames(""):
            method = getattr(self, "do_" + name.replace("-", "_"), None)
            doc = getattr(method, "__doc__", None) or ""
            commands[name] = doc.strip().splitlines()[0] if doc.strip() else ""
        namespace = {}
        namespace.update(self.frame_globals())
        namespace.update(self.frame_locals())

        def roots() -> list:
            return self.model_roots()

        return CompletionContext(commands=commands, namespace=namespace, roots=roots)

    def cmdloop(self, intro=None):
        console = self._stop_console()
        if console is None:
            from ..identity import current_rank

            if not self.use_rawinput or current_rank() is not None:  # a rank: Ctrl-C stays pyrepl's key
                return super().cmdloop(intro)
            from .plain import plain_input

            with plain_input(getattr(self, "fancycompleter", None)):
                return super().cmdloop(intro)
        self.preloop()
        if intro is not None:
            self.intro = intro
        if self.intro:
            self.stdout.write(str(self.intro) + "\n")
        stop = None
        while not stop:
            if self.cmdqueue:
                line = self.cmdqueue.pop(0)
            else:
                try:
                    self.stdout.flush()
                    line = console.read(self.prompt, self._completion_context, self.out_style().color)
                except EOFError:
                    line = "EOF"
            line = self.precmd(line)
            stop = self.onecmd(line)
            stop = self.postcmd(stop, line)
        self.postloop()
        return None
