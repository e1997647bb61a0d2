"""The frames an IDE's debugger or the ``kernels`` package put between the user's code and the model are
plumbing (``stack-model`` hides them): debugpy (VS Code, its vendored pydevd), PyCharm's pydevd, the
``kernels`` package's layer wrapper. A user's own file whose path only looks alike is not."""

from __future__ import annotations

import os
import sys

import pytest

from llmpdb.inspect.frame_kinds import is_plumbing

SITE = os.path.join(os.sep, "venv", "lib", "python3.11", "site-packages")


def _frame_in(filename: str, func: str = "run"):
    """A real frame whose code was compiled from ``filename`` (the file need not exist)."""
    namespace: dict = {"sys": sys}
    exec(compile(f"def {func}():\n    return sys._getframe()\n", filename, "exec"), namespace)
    return namespace[func]()


@pytest.mark.parametrize("parts", [
    ("debugpy", "_vendored", "pydevd", "_pydevd_bundle", "pydevd_frame.py"),
    ("debugpy", "_vendored", "pydevd", "pydevd.py"),
    ("debugpy", "server", "api.py"),
    ("_pydevd_bundle", "pydevd_trace_dispatch_regular.py"),
    ("_pydev_bundle", "pydev_monkey.py"),
    ("pydevd.py",),
    ("kernels", "layer.py"),
    ("kernels", "layer", "layer.py"),
    ("kernels", "_internals", "layer", "layer.py"),  # kernels 0.19: transformers 5.25's use_kernelized_func
])
def test_ide_debugger_and_kernels_frames_are_plumbing(parts):
    assert is_plumbing(_frame_in(os.path.join(SITE, *parts)))


def test_the_installed_kernels_wrapper_is_plumbing():
    """The file whose ``new_forward`` transformers 5.25 puts around an attention forward (kernels 0.19's
    ``use_kernelized_func``), wherever this environment installed it."""
    layer = pytest.importorskip("kernels._internals.layer.layer", reason="kernels 0.19+ is not installed")
    assert is_plumbing(_frame_in(layer.__file__, "new_forward"))


@pytest.mark.parametrize("path", [
    os.path.join(os.sep, "home", "me", "my_kernels", "train.py"),
    os.path.join(os.sep, "home", "me", "debugpy_notes.py"),
    os.path.join(SITE, "mylib", "layer.py"),
])
def test_look_alike_user_files_are_not_plumbing(path):
    assert not is_plumbing(_frame_in(path))
