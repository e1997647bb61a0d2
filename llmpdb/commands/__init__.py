"""Debugger command families, one module each; the debugger mixes in every class of ``COMMAND_MIXINS``."""

from __future__ import annotations

COMMAND_MIXINS: list[type] = []

from .navigation import NavigationCommands  # noqa: E402
COMMAND_MIXINS.append(NavigationCommands)
from .shapes import ShapesCommands  # noqa: E402
COMMAND_MIXINS.append(ShapesCommands)

from .statediff import StatediffCommands  # noqa: E402
COMMAND_MIXINS.append(StatediffCommands)
from .kv import KvCommands  # noqa: E402
COMMAND_MIXINS.append(KvCommands)
