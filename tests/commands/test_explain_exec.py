"""`explain` on code made by ``exec``: the frame that raised is the one reported, in one line when its
source is not kept (never a wrong frame's expression), explained as usual when ``linecache`` holds it (what
IPython does for a notebook cell)."""

from __future__ import annotations

import linecache

import torch
from transcript import debug_transcript, outputs_of

import llmpdb

SOURCE = "def project(a, b):\n    return a @ b\n"


def run_post_mortem(func, *args):
    try:
        func(*args)
    except Exception:
        llmpdb.post_mortem()


def made_by_exec(filename):
    namespace = {}
    exec(compile(SOURCE, filename, "exec"), namespace)
    return namespace["project"]


def call_it(project, a, b):
    return project(a, b)


def explained(project):
    return outputs_of(debug_transcript(run_post_mortem, ["c", "explain", "c"], call_it, project,
                                       torch.zeros(2, 3), torch.zeros(4, 5)))[0].splitlines()


def test_exec_frame_without_source_says_so_instead_of_explaining_the_caller():
    lines = explained(made_by_exec("<string>"))
    assert lines[0] == "RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"
    assert lines[1:] == ["  no source for <string>:2 (project): code made by exec/compile keeps none"]


def test_exec_frame_whose_source_linecache_holds_is_explained():
    filename = "<llmpdb-test-cell-1>"
    linecache.cache[filename] = (len(SOURCE), None, SOURCE.splitlines(True), filename)
    try:
        lines = explained(made_by_exec(filename))
    finally:
        linecache.cache.pop(filename, None)
    assert lines[1] == f"matmul (@): a @ b   at {filename}:2 in project"
    assert "  mismatch: a dim 1 (3) vs b dim 0 (4) (contracted dims (last of a, second-to-last of b))" in lines
