"""Tests of llmpdb.breakpoints (the tree mirrors the package)."""
