"""The ``Pdb`` class and its stop pipeline: composition, stepping, restart, recursive debug, thread gate.

Nothing is imported here: each module is imported where it is used (start-up time)."""
