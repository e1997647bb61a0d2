"""Files llmpdb writes and reads back: safetensors tensor files (``safetensors_file``), written atomically.

Usage::

    from llmpdb.files.safetensors_file import write_safetensors, read_safetensors

A low layer, like ``units``: it imports only the standard library, torch (already loaded by the
debuggee) and ``inspect.checkpoint_guard`` (the header checks); commands and the runtime import it.
"""
