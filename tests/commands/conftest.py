"""Every command test starts and ends with a fresh per-process session (snapshots, watches, breakpoints
numbered from 1, no module breakpoint, no root model chosen). A test module that needs more defines its own
``fresh_session``, which replaces this one (and may call ``fresh_module_state``)."""

from __future__ import annotations

import pytest

from llmpdb.session import SESSION


def fresh_module_state() -> None:
    """No module breakpoint, no root model chosen, a session numbered from 1."""
    from llmpdb.commands.navigation import set_user_root
    from llmpdb.forward.breakpoints import module_breakpoints

    module_breakpoints().clear()
    set_user_root(None)
    SESSION.reset()


@pytest.fixture(autouse=True)
def fresh_session():
    fresh_module_state()
    yield
    fresh_module_state()
