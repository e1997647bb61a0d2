"""Rank identity, the store records, waiting, rank commands, the rank terminal, hung-job dumps.

Nothing is imported here: each module is imported where it is used (start-up time)."""
