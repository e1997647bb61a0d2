"""The llmpdb version, written once (pyproject.toml reads it; ``llmpdb.__version__`` is this).

Usage::

    from llmpdb.version import __version__
"""

__version__ = "0.1.0"
