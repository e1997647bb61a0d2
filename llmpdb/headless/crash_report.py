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
"""

from __future__ import annotations

import os
import sys
import time
import traceback

from ..commands.navigation import render_stack_model, user_root
from ..commands.shapes import render_frame_shapes
from ..identity import current_rank, world_size
from ..inspect.frames import frame_locals
from ..inspect.modules import model_stack
from ..files.private_file import PrivateFileError, write_private_file
from ..render.style import Style
from ..inspect.debugger_frames import program_traceback

__all__ = ["crash_report", "save_crash_report", "report_destination", "exception_chain", "REPORT_WIDTH"]

REPORT_WIDTH = 100
_STYLE = Style(False)


def report_destination(option: str | None) -> str:
    """Usage: ``report_destination(args.report)``; the option, else ``LLMPDB_REPORT``, else
    ``llmpdb-crash-<pid>.txt`` in the current directory."""
    return option or os.environ.get("LLMPDB_REPORT", "") or os.path.join(os.getcwd(),
                                                                       f"llmpdb-crash-{os.getpid()}.txt")


def exception_chain(exc: BaseException) -> list[BaseException]:
    """Usage: ``exception_chain(exc)``; the causes and contexts first, ``exc`` last (traceback's order)."""
    chain, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        chain.append(exc)
        exc = exc.__cause__ if exc.__cause__ is not None else (
            None if exc.__suppress_context__ else exc.__context__)
    return chain[::-1]


def _stack(exc: BaseException) -> list[tuple[object, int]]:
    tb, stack = program_traceback(exc.__traceback__), []
    while tb is not None:
        stack.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    return stack


def _one_line(exc: BaseException) -> str:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()
    return text[-1] if text else type(exc).__name__


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
        body = f"(this section could not be made: {type(exc).__name__}: {exc})"
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
             f"program:  {' '.join(argv)} (cwd {os.getcwd()})",
             f"pid:      {os.getpid()}",
             f"rank:     {rank} of {size if size is not None else '?'}" if rank is not None
             else "rank:     none (not a distributed job)",
             "versions: " + ", ".join(v for v in versions if v)]
    for number, exc in enumerate(reversed(chain)):
        stack = _stack(exc)
        where = "?"
        if stack:
            entries = model_stack(stack, user_root())
            where = _frame_label(entries[-1]).split("] ", 1)[1]
        label = "location:" if number == 0 else "  from:  "
        lines.append(f"{label} {where}")
        lines.append(f"          {_one_line(exc)}")
    return "\n".join(lines) + "\n"


def _traceback_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, program_traceback(exc.__traceback__)))


def _frames_text(stack, shown: set[int]) -> str:
    entries = model_stack(stack, user_root())
    parts, hidden = [], []
    for entry, (frame, _) in zip(entries, stack):
        if entry.hidden and entry is not entries[-1]:
            hidden.append(entry.func)
            continue
        label = _frame_label(entry)
        if id(frame) in shown:
            parts.append(f"-- {label}: shown above")
            continue
        shown.add(id(frame))
        table = render_frame_shapes(frame_locals(frame), frame, width=REPORT_WIDTH, style=_STYLE)
        parts.append(f"-- {label}\n{table.rstrip()}")
    if hidden:
        names = ", ".join(dict.fromkeys(hidden))
        parts.append(f"({len(hidden)} plumbing frames not shown: {names})")
    return "\n".join(parts)


def crash_report(exc: BaseException, argv: list[str] | None = None) -> str:
    """Usage: ``crash_report(exc)``; the whole report as text (``argv`` defaults to ``sys.argv``)."""
    chain = exception_chain(exc)
    argv = list(sys.argv if argv is None else argv)
    sections = ["llmpdb crash report\n" + _section(None, lambda: _header(chain, argv)),
                _section("traceback", lambda: _traceback_text(exc))]
    for item in chain:
        stack = _stack(item)
        if stack:
            sections.append(_section(f"stack-model: {_one_line(item)}",
                                     lambda stack=stack: render_stack_model(stack, len(stack) - 1,
                                                                            width=REPORT_WIDTH, style=_STYLE)))
    shown: set[int] = set()
    for item in chain:
        stack = _stack(item)
        if stack:
            sections.append(_section(f"shapes: the frames of {_one_line(item)}",
                                     lambda stack=stack: _frames_text(stack, shown)))
    return "\n".join(sections)


def save_crash_report(exc: BaseException, path: str) -> tuple[bool, str]:
    """Usage: ``ok, line = save_crash_report(exc, path)``; writes the report, and the one line to print:
    where it went, or why it could not be written."""
    try:
        written = write_private_file(path, crash_report(exc))
    except PrivateFileError as exc_:
        return False, f"llmpdb: no crash report: {exc_}"
    return True, f"llmpdb: crash report written to {written}"
