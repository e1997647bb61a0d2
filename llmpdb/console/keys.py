"""Keys read at the console: a long typed or pasted line goes into the line as one insertion.

Usage::

    prompt_input = coalescing_input(stream)      # the prompt_toolkit input of ``console.prompt.Console``

prompt_toolkit handles each key on its own: it looks up the key bindings, then redraws, and each lookup
walks the whole layout, about 1.4 ms a key. A paste that the terminal does not mark as one (no bracketed
paste: ``screen``, an old terminal, ``pexpect``, keys sent by a script) costs that for every character, so
a 100 KB line took two minutes to come back. Here each read from the terminal gives its runs of plain
characters to prompt_toolkit as one paste (prompt_toolkit's own ``BracketedPaste`` key, which inserts the
text as it is): a run's first character stays a key of its own, so a key sequence waiting for one more key
(``Esc`` ``f``, ``Ctrl-X`` ``Ctrl-E``) gets it as before; control keys (Enter, Tab, Ctrl-C, arrows) stay
keys. A human typing produces one character a read, which goes through unchanged.
"""

from __future__ import annotations

import select
import time

__all__ = ["coalescing_input", "coalesce_keys"]

_MIN_RUN = 3  # a run this long or longer (in one read) becomes one insertion
_PASTE_READ = 256  # a read this long is a paste: what follows within _PASTE_GAP joins it ...
_PASTE_GAP = 0.01
_PASTE_WAIT = 0.5  # ... for at most this long and _PASTE_MAX keys, then the line is drawn
_PASTE_MAX = 1 << 20


def _plain(key_press) -> bool:
    """A printable character typed as itself (not a named key such as ``Keys.ControlM``)."""
    from prompt_toolkit.keys import Keys

    key = key_press.key
    return (type(key) is str and not isinstance(key, Keys) and len(key) == 1 and key == key_press.data
            and key.isprintable())


def coalesce_keys(keys: list) -> list:
    """Usage: ``coalesce_keys(vt100_input.read_keys())`` -> the same keys, each long run of plain
    characters after its first character as one ``BracketedPaste`` key holding the run's text."""
    from prompt_toolkit.key_binding.key_processor import KeyPress
    from prompt_toolkit.keys import Keys

    result: list = []
    run: list = []

    def flush() -> None:
        if len(run) >= _MIN_RUN:
            result.append(run[0])
            result.append(KeyPress(Keys.BracketedPaste, "".join(key.data for key in run[1:])))
        else:
            result.extend(run)
        run.clear()

    for key in keys:
        if _plain(key):
            run.append(key)
        else:
            flush()
            result.append(key)
    flush()
    return result


def coalescing_input(stream):
    """Usage: ``coalescing_input(stdin_copy)``; prompt_toolkit's input for ``stream``, whose reads on a POSIX
    terminal come back coalesced (``coalesce_keys``); elsewhere prompt_toolkit's own input."""
    from prompt_toolkit.input import create_input

    prompt_input = create_input(stream)
    try:
        from prompt_toolkit.input.vt100 import Vt100Input
    except ImportError:  # not POSIX
        return prompt_input
    if type(prompt_input) is not Vt100Input:
        return prompt_input

    class _CoalescingInput(Vt100Input):
        def read_keys(self):
            keys = super().read_keys()
            if len(keys) >= _PASTE_READ:  # a paste arriving: take the rest of it now, one redraw for all
                deadline = time.monotonic() + _PASTE_WAIT
                while len(keys) < _PASTE_MAX and time.monotonic() < deadline:
                    try:
                        ready = select.select([self.fileno()], [], [], _PASTE_GAP)[0]
                    except (OSError, ValueError):
                        break
                    more = super().read_keys() if ready else []
                    if not more:
                        break
                    keys.extend(more)
            return coalesce_keys(keys)

    return _CoalescingInput(stream)
