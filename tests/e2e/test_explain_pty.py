"""Post-mortem ``explain`` through ``python -m llmpdb`` in a real pty: a tiny Llama whose attention skips
repeat_kv dies uncaught; ``explain`` names both operands, their producers and the GQA mismatch."""

from __future__ import annotations

import pytest

from .pty_session import PtySession

BASES = pytest.mark.parametrize("base_env", [{}, {"LLMPDB_BASE": "stdlib"}], ids=["pdb++", "stdlib-pdb"])


@BASES
def test_post_mortem_explain_in_a_pty(base_env):
    with PtySession(["-m", "llmpdb", "tests/e2e/explain_script.py"], env=base_env, timeout=120, width=140) as s:
        s.wait_prompt()
        stop = s.run("c")
        assert "llmpdb: uncaught exception; post-mortem debugging" in stop
        out = s.run("explain")
        assert "matmul (@): query_states @ key_states.transpose(2, 3)   at explain_models.py:" in out
        assert "(1, 4, 7, 16)  batch · heads · seq · head_dim" in out
        assert "(1, 2, 16, 7)  batch · kv_heads · head_dim · seq" in out
        assert "from model.layers.0.self_attn.q_proj (Linear) → view → transpose → apply_rotary_pos_emb" in out
        assert "from model.layers.0.self_attn.k_proj (Linear) → view → transpose → apply_rotary_pos_emb" in out
        assert "mismatch: dim 1: 4 heads vs 2 kv_heads" in out
        assert "hint: GQA not expanded: repeat_kv missing?" in out
        assert "*** explain: invalid expression" in s.run("explain query_states @")
        s.finish("q")
