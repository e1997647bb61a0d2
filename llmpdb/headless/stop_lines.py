"""The lines the headless policy writes for a stop: where it is, and which module of the model runs there.

Usage::

    stop_line("log", frame)   # "llmpdb log 2026-12-03T13:50:01Z r0 work.py:5 work() · model.layers.0 (LlamaDecoderLayer)"
    stop_site(frame)          # ("work.py", 5): what the rate limits count
    in_debugger_code(frame)   # a frame of bdb/pdb/pdb++/cmd or llmpdb (by module name)
"""

from __future__ import annotations

import time

from ..identity import current_rank

__all__ = ["stop_line", "stop_site", "stop_where", "module_path", "in_debugger_code"]


def in_debugger_code(frame) -> bool:
    name = frame.f_globals.get("__name__", "")
    return name in ("bdb", "pdb", "pdbpp", "cmd") or name == "llmpdb" or name.startswith("llmpdb.")


def stop_site(frame) -> tuple[str, int]:
    return (frame.f_code.co_filename, frame.f_lineno) if frame is not None else ("?", 0)


def module_path(frame) -> str:
    try:
        from ..inspect.modules import frame_stack, module_frames

        rows = module_frames(frame_stack(frame))
    except Exception:  # a debugger is a guest: the line is written without the path
        return ""
    if not rows:
        return ""
    return f" · {rows[-1].qualname or '(root)'} ({rows[-1].class_name})"


def stop_line(policy: str, frame) -> str:
    """``llmpdb log 2026-12-03T13:50:01Z r0 work.py:5 work() · model.layers.0 (LlamaDecoderLayer)``"""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    rank = current_rank()
    rank_text = f" r{rank}" if rank is not None else ""
    return f"llmpdb {policy} {stamp}{rank_text} {stop_where(frame)}{module_path(frame)}"


def stop_where(frame) -> str:
    return f"{frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}()" if frame is not None else "?"
