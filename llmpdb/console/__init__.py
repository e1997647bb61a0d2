"""The prompt: prompt_toolkit input, history, completion, colour.

Nothing is imported here: each module is imported where it is used (start-up time)."""
