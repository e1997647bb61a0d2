"""Shared test set-up: ``tests/`` on ``sys.path`` (``from tiny_models import tiny_llama``), a quiet
transformers, and a guard that fails any test leaving a trace, profile or monitoring callback behind."""

from __future__ import annotations

import os
import sys

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS)
# The checkout first (its llmpdb, not an installed one); tests/ appended, not prepended: tests/inspect/
# must never shadow the standard library's ``inspect``.
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
if TESTS not in sys.path:
    sys.path.append(TESTS)

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Runs without a terminal keep the tour (the "log" policy); tests of "attach" and "skip" ask for them.
os.environ.setdefault("LLMPDB_HEADLESS", "log")


def _monitoring_tools() -> list[int]:
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is None:
        return []
    return [tool for tool in range(6) if monitoring.get_tool(tool) in ("llmpdb", "llmpdb catch")]


@pytest.fixture(autouse=True)
def no_trace_left_behind():
    """Fail a test that leaves ``sys.settrace``/``sys.setprofile`` or an llmpdb monitoring tool installed."""
    before = (sys.gettrace(), sys.getprofile())
    hook = sys.breakpointhook
    yield
    leaked = []
    if sys.gettrace() is not before[0]:
        leaked.append(f"trace function {sys.gettrace()!r}")
    if sys.getprofile() is not before[1]:
        leaked.append(f"profile function {sys.getprofile()!r}")
    if _monitoring_tools():
        leaked.append(f"sys.monitoring tools {_monitoring_tools()}")
    sys.settrace(before[0])
    sys.setprofile(before[1])
    sys.breakpointhook = hook
    if leaked:
        pytest.fail("test left behind: " + ", ".join(leaked))
