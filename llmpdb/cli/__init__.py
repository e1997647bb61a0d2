"""The command line: ``python -m llmpdb`` (run a script or module), ``attach``, ``open``, ``ranks --job``.

Nothing is imported here: each module is imported where it is used (start-up time)."""
