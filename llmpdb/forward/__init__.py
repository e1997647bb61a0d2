"""Everything built on forward hooks: module breakpoints (``break-module``) and one-shot stops.

Usage::

    from llmpdb.forward.breakpoints import module_breakpoints
    module_breakpoints().add("layers.1.self_attn", [model])

``arming`` (forward pre-hooks kept out of dynamo, post-import arming), ``one_shot`` (stop at the entry of
one module's forward), ``breakpoints`` (the ``break-module`` engine).
"""
