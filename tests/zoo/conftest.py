"""The zoo's tests import ``tests.commands.conftest`` for the per-session reset."""
