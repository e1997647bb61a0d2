"""The 3.11 engine's heap pass finds every function and suspended generator of a breakpoint file: defined
by import, by ``exec`` into a namespace without ``__file__``, as closures, and skips other modules' functions
without reading their code."""

from __future__ import annotations

import importlib.util
import os

from llmpdb.breakpoints.heap_walk import breakpoint_code_on_heap

SOURCE = '''\
def plain():
    return 1


def outer():
    def inner():
        return 2
    return inner


def gen():
    yield 3
'''


def _load(path):
    spec = importlib.util.spec_from_file_location("heap_walk_target", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_functions_closures_generators_and_exec_without_file(tmp_path):
    path = str(tmp_path / "heap_walk_target.py")
    with open(path, "w") as handle:
        handle.write(SOURCE)
    module = _load(path)
    closure = module.outer()
    running = module.gen()
    next(running)
    namespace = {}  # no __file__: such functions are read, not skipped
    exec(compile(SOURCE, path, "exec"), namespace)
    canonic = os.path.realpath
    found, wrappers = breakpoint_code_on_heap({canonic(path): frozenset({2})}, canonic, dynamo=False)
    objects = [obj for obj, _ in found]
    for expected in (module.plain, module.outer, closure, running, namespace["plain"], namespace["gen"]):
        assert any(obj is expected for obj in objects), expected
    assert all(code.co_filename == path for _, code in found)
    assert not any(obj is os.path.join for obj in objects)  # another module's function
    assert wrappers == []
    running.close()
