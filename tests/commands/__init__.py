"""Tests of llmpdb.commands (the tree mirrors the package)."""
