"""Debugger command families, one module each; the debugger mixes in every class of ``COMMAND_MIXINS``.

Importing a family registers its stop notes; they print in registration order at every stop: the
compiled-code warning (here), the KV history record (``kv``, prints nothing), the path line (``navigation``).
"""

from __future__ import annotations

from ..inspect.compiled import compiled_note
from ..session import register_stop_note

COMMAND_MIXINS: list[type] = []


@register_stop_note
def compiled_code_note(frame, debugger) -> str | None:
    """The warning that graph-computed locals are missing, once per stop in compiled code."""
    return compiled_note(frame)


from .catch import CatchCommands  # noqa: E402
from .diverge import DivergeCommands  # noqa: E402
from .dump import DumpCommands  # noqa: E402
from .explain import ExplainCommands  # noqa: E402
from .grads import GradsCommands  # noqa: E402
from .help import HelpCommands  # noqa: E402
from .ide import IdeCommands  # noqa: E402
from .kv import KvCommands  # noqa: E402
from .mem import MemCommands  # noqa: E402
from .mute import MuteCommands  # noqa: E402
from .nan_break import NanBreakCommands  # noqa: E402
from .navigation import NavigationCommands  # noqa: E402
from .shapes import ShapesCommands  # noqa: E402
from .show import ShowCommands  # noqa: E402
from .statediff import StatediffCommands  # noqa: E402
from .tokens import TokensCommands  # noqa: E402
from .trace import TraceCommands  # noqa: E402
from .watching import WatchCommands  # noqa: E402

COMMAND_MIXINS.extend([CatchCommands, HelpCommands, MuteCommands, NavigationCommands, ShapesCommands,
                       StatediffCommands, KvCommands, TraceCommands, WatchCommands, NanBreakCommands,
                       GradsCommands, TokensCommands, DivergeCommands, DumpCommands, MemCommands,
                       ShowCommands, ExplainCommands, IdeCommands])
