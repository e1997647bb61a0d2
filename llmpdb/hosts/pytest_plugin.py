"""The pytest plugin (entry point ``pytest11``: ``llmpdb``): ``pytest --llmpdb`` opens llmpdb on failures.

Usage::

    pytest --llmpdb            # = pytest --pdb --pdbcls=llmpdb:Pdb: post-mortem at a failing test
    pytest --llmpdb-trace      # = pytest --trace --pdbcls=llmpdb:Pdb: stop at the start of each test
    PYTHONBREAKPOINT=llmpdb.set_trace pytest   # breakpoint() in a test opens llmpdb, capture off for the stop

pytest loads the plugin from the installed package's entry point; without installing, ``-p
llmpdb.hosts.pytest_plugin`` loads it. The options only set pytest's own ``--pdb``/``--trace``/``--pdbcls``
before its debugging plugin reads them, so capture, ``-x`` and the rest behave as with ``--pdb``.
"""

from __future__ import annotations

import pytest

__all__ = ["pytest_addoption", "pytest_configure"]

PDBCLS = ("llmpdb", "Pdb")  # what pytest's --pdbcls=llmpdb:Pdb parses to


def pytest_addoption(parser) -> None:
    group = parser.getgroup("llmpdb", "llmpdb, the debugger for PyTorch/LLM code")
    group.addoption("--llmpdb", action="store_true", dest="llmpdb",
                    help="open llmpdb at a failure or KeyboardInterrupt (= --pdb --pdbcls=llmpdb:Pdb)")
    group.addoption("--llmpdb-trace", action="store_true", dest="llmpdb_trace",
                    help="open llmpdb at the start of each test (= --trace --pdbcls=llmpdb:Pdb)")


@pytest.hookimpl(tryfirst=True)  # before pytest's debugging plugin reads usepdb/trace/usepdb_cls
def pytest_configure(config) -> None:
    option = config.option
    if getattr(option, "llmpdb", False):
        option.usepdb = True
        option.usepdb_cls = PDBCLS
    if getattr(option, "llmpdb_trace", False):
        option.trace = True
        option.usepdb_cls = PDBCLS
