"""Tests of llmpdb.render (the tree mirrors the package)."""
