"""Tests of llmpdb.forward (the tree mirrors the package)."""
