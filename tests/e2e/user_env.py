"""Run a child Python as a user who installed llmpdb with its default dependencies: no pdb++ hijack.

Usage::

    args, env = user_python(["-m", "IPython"])     # python -S, PYTHONPATH = the checkout + site dirs
    with PtySession(args, env=env) as s: ...

The test extra installs pdb++ (the second debugger base is tested too), and pdb++'s ``.pth`` file puts a
``pdb`` of its own first on ``sys.path``. ``python -S`` processes no ``.pth`` file: the child sees the same
installed packages (the site-packages directories on ``PYTHONPATH``), without the hijack, as a user whose
environment has no pdb++ in it sees them after ``pip install llmpdb``.
"""

from __future__ import annotations

import os
import site
import sys

from .pty_session import ROOT

__all__ = ["user_python", "HIJACK_DIR_MARK"]

HIJACK_DIR_MARK = "_pdbpp_path_hack"


def _package_dirs() -> list[str]:
    dirs = [p for p in sys.path if p and os.path.isdir(p) and HIJACK_DIR_MARK not in p
            and os.path.abspath(p) != ROOT and ("site-packages" in p or "dist-packages" in p
                                               or p in os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    for extra in (*site.getsitepackages(), site.getusersitepackages()):
        if extra not in dirs and os.path.isdir(extra):
            dirs.append(extra)
    return dirs


def user_python(args: list[str], env: dict | None = None) -> tuple[list[str], dict]:
    """Usage: ``user_python(["script.py"])`` -> (args for ``PtySession``, env); ``-S`` and the path set."""
    path = os.pathsep.join([ROOT, *_package_dirs()])
    return ["-S", *args], {"PYTHONPATH": path, "PDBPP_HIJACK_PDB": None, **(env or {})}
