"""The standard streams, what a stop does with no terminal, the headless policy, crash reports.

Nothing is imported here: each module is imported where it is used (start-up time)."""
