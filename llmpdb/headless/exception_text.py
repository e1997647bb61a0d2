"""The text of a user's exception, bounded, without running the exception's own properties.

Usage::

    chain = exception_chain(exc)             # oldest first; an int in it counts the links left out there
    line = one_line(exc)                     # "ValueError: the model failed" (one line, cut, never raises)
    text = traceback_text(exc)               # as Python prints it: the chain, each traceback, bounded
    text = python_traceback_text(exc, tb)    # exactly what Python prints, where that is safe; else the above
    tb = exception_field(exc, "__traceback__")

A debugger is a guest: an exception class may override ``__traceback__``, ``__cause__``, ``__context__``
or ``__suppress_context__`` with a property (user code, which may raise, hang or change state), so they
are read through ``BaseException``'s own descriptors, as the interpreter reads them. ``str(exc)`` is the
one call into the exception (Python's own traceback makes it too); anything it raises gives
``<exception str() failed>``. Every size is bounded: a chain keeps its ``OLDEST_LINKS`` oldest and
``NEWEST_LINKS`` newest exceptions, a traceback its ``HEAD_FRAMES`` first and ``TAIL_FRAMES`` last
frames, a message its first ``MESSAGE_HEAD`` and last ``MESSAGE_TAIL`` characters; each cut says how much
was left out. Time is linear in what is kept (plus one walk of the chain and of each kept traceback).
"""

from __future__ import annotations

import traceback
import types

from ..inspect.debugger_frames import program_traceback

__all__ = ["exception_field", "exception_chain", "one_line", "message_text", "traceback_text",
           "python_traceback_text", "frames_of", "cut_text", "OLDEST_LINKS", "NEWEST_LINKS", "HEAD_FRAMES",
           "TAIL_FRAMES", "MESSAGE_HEAD", "MESSAGE_TAIL"]

OLDEST_LINKS, NEWEST_LINKS = 5, 20
HEAD_FRAMES, TAIL_FRAMES = 20, 80
MESSAGE_HEAD, MESSAGE_TAIL = 3000, 1000
_MAX_WALK = 1_000_000  # links walked to count a chain; a longer one is "at least" that long
_MAX_NOTES, _MAX_GROUP = 10, 10
_FIELDS = ("__traceback__", "__cause__", "__context__", "__suppress_context__")
_DESCRIPTORS = {name: BaseException.__dict__[name] for name in _FIELDS}
_TYPE_DICT = type.__dict__["__dict__"]
_TYPE_MRO = type.__dict__["__mro__"]
_INSTANCE_DICT = BaseException.__dict__["__dict__"]
_GROUP_EXCEPTIONS = BaseExceptionGroup.__dict__["exceptions"]
# names whose override makes Python's own traceback module call user code on this exception
_OVERRIDES = frozenset(_FIELDS) | {"__notes__", "__getattribute__", "__getattr__", "__class__", "exceptions"}
_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"


def exception_field(exc, name: str):
    """Usage: ``exception_field(exc, "__cause__")``; the field as the interpreter stores it (None when
    ``exc`` is not an exception)."""
    try:
        return _DESCRIPTORS[name].__get__(exc)
    except Exception:  # not a BaseException at all
        return None


def _is_exception(value) -> bool:
    return BaseException in _TYPE_MRO.__get__(type(value))


def _next_link(exc):
    cause = exception_field(exc, "__cause__")
    if cause is not None:
        return cause
    return None if exception_field(exc, "__suppress_context__") else exception_field(exc, "__context__")


def exception_chain(exc: BaseException) -> list:
    """Usage: ``for item in exception_chain(exc)``; the causes and contexts first, ``exc`` last (the order
    traceback prints them). Where links were left out, an ``int`` (how many) stands in their place."""
    newest, seen = [], set()
    while exc is not None and id(exc) not in seen and len(seen) < _MAX_WALK and _is_exception(exc):
        seen.add(id(exc))
        newest.append(exc)
        exc = _next_link(exc)
    chain = newest[::-1]
    if len(chain) <= OLDEST_LINKS + NEWEST_LINKS:
        return chain
    return chain[:OLDEST_LINKS] + [len(chain) - OLDEST_LINKS - NEWEST_LINKS] + chain[-NEWEST_LINKS:]


def cut_text(text: str, head: int = MESSAGE_HEAD, tail: int = MESSAGE_TAIL) -> str:
    """Usage: ``cut_text(message)``; ``text`` itself, or its head and tail around ``[... N characters cut ...]``."""
    if len(text) <= head + tail + 100:
        return text
    return f"{text[:head]}[... {len(text) - head - tail:,} characters cut ...]{text[len(text) - tail:]}"


def _type_name(cls) -> str:
    try:
        name = type.__dict__["__qualname__"].__get__(cls)
        module = type.__dict__["__module__"].__get__(cls)
    except Exception:  # a class whose name cannot be read without its own code: shown as "?", never guessed
        return "?"
    if type(module) is str and module not in ("__main__", "builtins"):
        return f"{module}.{name}"
    return name


def message_text(exc) -> str:
    """Usage: ``message_text(exc)``; ``str(exc)``, cut; a placeholder when ``str()`` fails."""
    try:
        text = str(exc)
        text = str.__getitem__(text, slice(None))  # an exact str: a subclass's own methods never run
    except BaseException:  # noqa: BLE001 - a guest survives anything the user's __str__ raises
        return "<exception str() failed>"
    return cut_text(text)


def _header_line(exc) -> str:
    name, text = _type_name(type(exc)), message_text(exc)
    return f"{name}: {text}" if text else name


def one_line(exc) -> str:
    """Usage: ``one_line(exc)``; ``Type: message`` on one line (a longer message: its first line, then how
    many more lines it has)."""
    line = _header_line(exc)
    lines = line.splitlines() or [line]
    first = cut_text(lines[0], 200, 100)
    return first if len(lines) == 1 else f"{first} [+{len(lines) - 1} lines]"


def frames_of(exc) -> list[tuple[object, int]]:
    """Usage: ``frames_of(exc)``; its traceback's (frame, line) pairs, without llmpdb's and bdb's."""
    tb, stack = program_traceback(exception_field(exc, "__traceback__")), []
    while tb is not None:
        stack.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    return stack


def _entries(exc) -> list:
    tb, entries = program_traceback(exception_field(exc, "__traceback__")), []
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    return entries


def _relinked(entries: list):
    chain = None
    for entry in reversed(entries):
        chain = types.TracebackType(chain, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return chain


def _frames_text(entries: list) -> str:
    if len(entries) <= HEAD_FRAMES + TAIL_FRAMES:
        return "".join(traceback.format_list(traceback.extract_tb(_relinked(entries))))
    head = traceback.format_list(traceback.extract_tb(_relinked(entries[:HEAD_FRAMES])))
    tail = traceback.format_list(traceback.extract_tb(_relinked(entries[-TAIL_FRAMES:])))
    left_out = len(entries) - HEAD_FRAMES - TAIL_FRAMES
    return "".join(head) + f"  [... {left_out:,} frames left out ...]\n" + "".join(tail)


def _notes_text(exc) -> str:
    try:
        notes = _INSTANCE_DICT.__get__(exc).get("__notes__")
    except Exception as err:  # never seen: said rather than dropped
        return f"[its notes could not be read: {type(err).__name__}]\n"
    if type(notes) not in (list, tuple):
        return ""
    lines = [cut_text(note) + "\n" for note in notes[:_MAX_NOTES] if type(note) is str]
    if len(notes) > _MAX_NOTES:
        lines.append(f"[... {len(notes) - _MAX_NOTES} more notes ...]\n")
    return "".join(lines)


def _group_text(exc) -> str:
    if BaseExceptionGroup not in _TYPE_MRO.__get__(type(exc)):
        return ""
    try:
        members = _GROUP_EXCEPTIONS.__get__(exc)
    except Exception as err:  # never seen: said rather than dropped
        return f"  +-- [its exceptions could not be read: {type(err).__name__}]\n"
    lines = [f"  +-- {i}: {one_line(member)}\n" for i, member in enumerate(members[:_MAX_GROUP], 1)]
    if len(members) > _MAX_GROUP:
        lines.append(f"  +-- [... {len(members) - _MAX_GROUP} more exceptions ...]\n")
    return "".join(lines)


def _link_text(exc) -> str:
    entries = _entries(exc)
    frames = "Traceback (most recent call last):\n" + _frames_text(entries) if entries else ""
    return frames + _header_line(exc) + "\n" + _notes_text(exc) + _group_text(exc)


def traceback_text(exc: BaseException) -> str:
    """Usage: ``traceback_text(exc)``; the chain as Python prints it, each part bounded (see the module)."""
    parts, previous = [], None
    for item in exception_chain(exc):
        if isinstance(item, int):
            parts.append(f"\n[... {item:,} chained exceptions left out ...]\n\n")
            previous = None
            continue
        if previous is not None:
            parts.append(_CAUSE if exception_field(item, "__cause__") is previous else _CONTEXT)
        parts.append(_link_text(item))
        previous = item
    return "".join(parts)


def _plain(exc) -> bool:
    """Whether Python's traceback module reads only the interpreter's own fields of ``exc``."""
    try:
        for klass in _TYPE_MRO.__get__(type(exc)):
            if klass is BaseException or klass is BaseExceptionGroup:
                return True
            if not _OVERRIDES.isdisjoint(_TYPE_DICT.__get__(klass)):
                return False
    except Exception:
        return False
    return True


def python_traceback_text(exc: BaseException) -> str:
    """Usage: ``sys.stderr.write(python_traceback_text(exc))``; what Python prints for an uncaught ``exc``
    (llmpdb's own frames left out), made by the traceback module when no exception of the chain overrides
    what it reads and the chain is not cut; else ``traceback_text``."""
    chain = exception_chain(exc)
    if all(not isinstance(item, int) and _plain(item) for item in chain):
        try:
            return "".join(traceback.format_exception(type(exc), exc, _relinked(_entries(exc))))
        except BaseException:  # noqa: BLE001 - e.g. a __str__ raising KeyboardInterrupt: the bounded text
            pass
    return traceback_text(exc)
