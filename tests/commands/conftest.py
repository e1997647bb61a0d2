"""Every command test starts and ends with a fresh per-process session (snapshots, watches, breakpoints
numbered from 1). A test module that needs more (module breakpoints cleared, a root model unset) defines its
own ``fresh_session``, which replaces this one."""

from __future__ import annotations

import pytest

from llmpdb.session import SESSION


@pytest.fixture(autouse=True)
def fresh_session():
    SESSION.reset()
    yield
    SESSION.reset()
