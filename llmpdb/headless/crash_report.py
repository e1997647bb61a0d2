"""``crash_report(exc)``: the text of a crash report for an uncaught exception; ``save_crash_report`` writes it.

Usage::

    path = report_destination(None)          # --report PATH, else LLMPDB_REPORT, else ./llmpdb-crash-<pid>.txt
    text = crash_report(exc)                 # header, exception chain, stack-model and shapes of each frame
    line = save_crash_report(exc, path)      # writes it (0600, atomic, no symlink); the one line to print

``python -m llmpdb`` writes one when an uncaught exception meets no terminal, or when ``--report PATH`` was
given. The report holds: the time, program, pid, rank, the Python/torch/transformers/llmpdb versions and
where the exception was raised (with the module path); the traceback with its ``__cause__``/``__context__``
chain, as Python prints it; for each exception of the chain, the stack as ``stack-model`` shows it (path
header and table); then ``shapes`` of each of those frames (the plumbing ``stack-model`` hides without
``--all`` is only counted). llmpdb's, bdb's and pdb's own frames are left out, as at the prompt. No tensor
data is read: shapes, dtypes and devices only. A section that fails says why and the others are still
written.

Bounded whatever the exception (``llmpdb.headless.exception_text``): a chain keeps its 5 oldest and 20
newest exceptions, a traceback its first 20 and last 80 frames, a message its first 3000 and last 1000
characters (each cut says how much it left out); stack-model shows the innermost ``STACK_FRAMES`` frames,
shapes at most ``SHAPES_FRAMES`` frames in all, and the whole report is at most ``MAX_REPORT_CHARS``. The
exception's ``__traceback__``/``__cause__``/``__context__`` are read as the interpreter stores them (a
class's properties of those names never run); a ``__str__`` that raises gives ``<exception str() failed>``.
"""

from __future__ import annotations

import os
import sys
import time

from ..commands.navigation import render_stack_model, user_root
from ..commands.shapes import render_frame_shapes
from ..identity import current_rank, world_size
from ..inspect.frames import frame_locals
from ..inspect.modules import model_stack
from ..files.private_file import PrivateFileError, write_private_file
from ..render.style import Style
from .exception_text import cut_text, exception_chain, frames_of, one_line, traceback_text

__all__ = ["crash_report", "save_crash_report", "report_destination", "exception_chain", "REPORT_WIDTH",
           "STACK_FRAMES", "SHAPES_FRAMES", "MAX_REPORT_CHARS"]

REPORT_WIDTH = 100
STACK_FRAMES = 100  # frames of one traceback in stack-model (the innermost ones)
SHAPES_FRAMES = 60  # frames whose shapes the whole report shows
MAX_REPORT_CHARS = 4_000_000  # a longer report keeps its head and tail
_STYLE = Style(False)


def report_destination(option: str | None) -> str:
    """Usage: ``report_destination(args.report)``; the option, else ``LLMPDB_REPORT``, else
    ``llmpdb-crash-<pid>.txt`` in the current directory."""
    return option or os.environ.get("LLMPDB_REPORT", "") or os.path.join(os.getcwd(),
                                                                       f"llmpdb-crash-{os.getpid()}.txt")


def _stack(exc: BaseException) -> tuple[list[tuple[object, int]], int]:
    """The innermost ``STACK_FRAMES`` (frame, line) pairs of ``exc``'s traceback, and how many were left out."""
    stack = frames_of(exc)
    return stack[-STACK_FRAMES:], max(0, len(stack) - STACK_FRAMES)


def _links(chain: list) -> list[BaseException]:
    return [item for item in chain if not isinstance(item, int)]


def _frame_label(entry) -> str:
    place = f"[{entry.index}] {entry.filename}:{entry.lineno} {entry.func}()"
    module = entry.module
    if module is None:
        return place
    return f"{place} · {module.qualname or '(root)'} ({module.class_name})"


def _section(title: str | None, build) -> str:
    try:
        body = build()
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a debugger is a guest: one section lost, the report still written
        body = f"(this section could not be made: {one_line(exc)})"
    return f"== {title} ==\n{body.rstrip()}\n" if title else body.rstrip() + "\n"


def _version(name: str) -> str | None:
    module = sys.modules.get(name)
    version = getattr(module, "__version__", None) if module is not None else None
    return f"{name} {version}" if isinstance(version, str) else None


def _header(chain: list[BaseException], argv: list[str]) -> str:
    from ..version import __version__
    from ..base import BASE_NAME

    rank, size = current_rank(), world_size()
    versions = [f"Python {sys.version.split()[0]}", _version("torch") or "torch not imported",
                _version("transformers"), f"llmpdb {__version__} on {BASE_NAME}"]
    lines = [f"time:     {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}",
             f"program:  {cut_text(' '.join(argv), 2000, 500)} (cwd {os.getcwd()})",
             f"pid:      {os.getpid()}",
             f"rank:     {rank} of {size if size is not None else '?'}" if rank is not None
             else "rank:     none (not a distributed job)",
             "versions: " + ", ".join(v for v in versions if v)]
    for number, exc in enumerate(reversed(chain)):
        if isinstance(exc, int):
            lines.append(f"  ({exc:,} more chained exceptions left out)")
            continue
        stack, _ = _stack(exc)
        where = "?"
        if stack:
            entries = model_stack(stack, user_root())
            where = _frame_label(entries[-1]).split("] ", 1)[1]
        label = "location:" if number == 0 else "  from:  "
        lines.append(f"{label} {where}")
        lines.append(f"          {one_line(exc)}")
    return "\n".join(lines) + "\n"


def _stack_model_text(stack, left_out: int) -> str:
    table = render_stack_model(stack, len(stack) - 1, width=REPORT_WIDTH, style=_STYLE)
    return f"({left_out:,} outer frames left out)\n{table}" if left_out else table


def _frames_text(stack, shown: set[int], budget: list[int]) -> str:
    entries = model_stack(stack, user_root())
    parts, hidden, over = [], [], 0
    for entry, (frame, _) in zip(entries, stack):
        if entry.hidden and entry is not entries[-1]:
            hidden.append(entry.func)
            continue
        label = _frame_label(entry)
        if id(frame) in shown:
            parts.append(f"-- {label}: shown above")
            continue
        if budget[0] <= 0:
            over += 1
            continue
        budget[0] -= 1
        shown.add(id(frame))
        table = render_frame_shapes(frame_locals(frame), frame, width=REPORT_WIDTH, style=_STYLE)
        parts.append(f"-- {label}\n{table.rstrip()}")
    if hidden:
        names = ", ".join(dict.fromkeys(hidden))
        parts.append(f"({len(hidden)} plumbing frames not shown: {names})")
    if over:
        parts.append(f"({over:,} frames not shown: the report shows the shapes of {SHAPES_FRAMES} frames)")
    return "\n".join(parts)


def crash_report(exc: BaseException, argv: list[str] | None = None) -> str:
    """Usage: ``crash_report(exc)``; the whole report as text (``argv`` defaults to ``sys.argv``), at most
    ``MAX_REPORT_CHARS`` long."""
    chain = exception_chain(exc)
    argv = list(sys.argv if argv is None else argv)
    sections = ["llmpdb crash report\n" + _section(None, lambda: _header(chain, argv)),
                _section("traceback", lambda: traceback_text(exc))]
    for item in _links(chain):
        stack, left_out = _stack(item)
        if stack:
            sections.append(_section(f"stack-model: {one_line(item)}",
                                     lambda stack=stack, left_out=left_out: _stack_model_text(stack, left_out)))
    shown: set[int] = set()
    budget = [SHAPES_FRAMES]
    for item in _links(chain):
        stack, _ = _stack(item)
        if stack:
            sections.append(_section(f"shapes: the frames of {one_line(item)}",
                                     lambda stack=stack: _frames_text(stack, shown, budget)))
    return cut_text("\n".join(sections), MAX_REPORT_CHARS // 2, MAX_REPORT_CHARS // 2 - 100)


def save_crash_report(exc: BaseException, path: str) -> tuple[bool, str]:
    """Usage: ``ok, line = save_crash_report(exc, path)``; writes the report, and the one line to print:
    where it went, or why it could not be written."""
    try:
        written = write_private_file(path, crash_report(exc))
    except PrivateFileError as exc_:
        return False, f"llmpdb: no crash report: {exc_}"
    except Exception as exc_:  # noqa: BLE001 - a bug of llmpdb's never hides the program's own traceback
        return False, f"llmpdb: no crash report: {type(exc_).__name__} while writing it"
    return True, f"llmpdb: crash report written to {written}"
