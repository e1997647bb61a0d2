"""Navigation commands never undo an edit made at the prompt, and a hostile local never breaks them.

``!x = 99`` writes into the debugger's locals mapping; on Python 3.11/3.12 reading ``frame.f_locals`` again
copies the frame's fast locals over it, and the program continued with the old value (issue #10). Every
command below looks at the frame's locals; the program must still see 99.
"""

from __future__ import annotations

import torch

from tiny_models import tiny_llama
from transcript import after, debug_transcript


class NoClass:
    """A local whose ``__class__`` raises: what an object is must be read from ``type()``."""

    @property
    def __class__(self):
        raise RuntimeError("no __class__ for you")


def test_an_edit_at_the_prompt_survives_every_navigation_command():
    seen = []

    def program():
        model = tiny_llama()
        x = 1
        breakpoint()
        seen.append(x)
        return model

    out = debug_transcript(program, ["c", "!x = 99", "bm nothing_matches", "bm layers.0.mlp --once", "sm",
                                     "root-model", "model", "wf", "shapes", "kv", "p x", "c"])
    assert seen == [99], out
    assert after(out, 3) == "module breakpoint 2: layers.0.mlp, once -> model.layers.0.mlp\n"
    assert after(out, 10) == "99\n"


def test_a_local_whose_class_raises_is_skipped_by_root_model_wf_and_bm():
    seen = []

    def program():
        model = tiny_llama()
        hostile = NoClass()
        breakpoint()
        with torch.no_grad():
            model(torch.tensor([[1, 2, 3]]))
        seen.append(hostile)

    out = debug_transcript(program, ["c", "root-model", "wf", "bm layers.1.self_attn", "sm", "c",
                                     "p type(self).__name__", "c"])
    assert "internal error" not in out, out
    assert after(out, 1) == "root-model: LlamaForCausalLM (found among the current frame's variables)\n"
    assert after(out, 2).startswith("LlamaForCausalLM.forward")
    assert after(out, 3) == "module breakpoint 1: layers.1.self_attn -> model.layers.1.self_attn\n"
    assert "(no module forward on the stack" in after(out, 4)
    assert after(out, 5).startswith("module breakpoint 1: model.layers.1.self_attn (LlamaAttention), hit 1\n")
    assert after(out, 6) == "'LlamaAttention'\n"
    assert len(seen) == 1
