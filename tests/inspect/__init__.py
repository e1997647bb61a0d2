"""Tests of llmpdb.inspect (the tree mirrors the package)."""
