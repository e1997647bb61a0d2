"""Everything built on forward hooks: module breakpoints (``break-module``) and one-shot stops.

Usage::

    from llmpdb.forward.breakpoints import module_breakpoints
    module_breakpoints().add("layers.1.self_attn", [model])

``arming`` (forward pre-hooks kept out of dynamo, post-import arming), ``one_shot`` and
``one_shot_monitor`` (stop at the entry of one module's forward: a trace function on 3.11, a local
``PY_START`` event on 3.12+), ``breakpoints`` (the ``break-module`` engine).
"""
