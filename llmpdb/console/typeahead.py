"""Keys typed after the accepted line go back to the terminal, where the program's next read finds them.

Usage::

    line = session.prompt(...)
    give_back_typeahead(session.input, sys.stdin.fileno())

prompt_toolkit reads whatever the terminal holds, so ``c`` Enter typed together with the answer to the
program's own ``input()`` (a paste, or a fast typist) leaves that answer in prompt_toolkit's type-ahead
store, which only the debugger's next prompt would read: the program waits for a line it was already
given. Here the bytes of those keys are put back into the terminal's input queue (``TIOCSTI``), in order,
so the next reader, the program or the next prompt, gets them as typed. Where the kernel refuses that
(``dev.tty.legacy_tiocsti = 0``, no terminal), the keys stay in prompt_toolkit's store for the next prompt,
as before.
"""

from __future__ import annotations

__all__ = ["give_back_typeahead"]


def give_back_typeahead(prompt_input, fd: int) -> int:
    """Usage: ``give_back_typeahead(session.input, 0)`` -> bytes put back (0: none, or refused)."""
    from prompt_toolkit.input.typeahead import get_typeahead, store_typeahead

    keys = get_typeahead(prompt_input)  # taken out of the store
    data = "".join(key.data for key in keys if isinstance(key.data, str)).encode("utf-8", "replace")
    if not data:
        return 0
    try:
        import fcntl
        import termios

        fcntl.ioctl(fd, termios.TIOCSTI, data[:1])
    except (ImportError, OSError, AttributeError, ValueError, TypeError):
        store_typeahead(prompt_input, keys)  # refused: the next prompt reads them, as prompt_toolkit does
        return 0
    given = 1
    for index in range(1, len(data)):
        try:
            fcntl.ioctl(fd, termios.TIOCSTI, data[index:index + 1])
        except OSError:  # the queue is full: what is left is lost, as on a terminal that overflows
            break
        given += 1
    return given
