"""``diverge`` typed in a real terminal: ``python -m llmpdb examples/infer.py``, at the stop after the
tokenizer (``inputs`` is a BatchEncoding): a bf16 copy, eager attention, a bad setting, the program's
model, config, grad mode and RNG unchanged afterwards, a ``--break`` stop in the diverging module; the
program then runs to its end."""

from __future__ import annotations

import re

import pytest

from .pty_session import PtySession, clean

pytestmark = pytest.mark.timeout(180)


def test_diverge_in_a_pty_leaves_the_program_as_it_was():
    with PtySession(["-m", "llmpdb", "examples/infer.py"], env={"TRANSFORMERS_VERBOSITY": "error",
                                                               "HF_HUB_OFFLINE": "1"}) as s:
        s.wait_prompt()
        assert "infer.py(35)main()" in s.run("c")
        s.run("!import torch; rng0 = torch.get_rng_state().clone()")
        bf16 = s.run("diverge model(**inputs) --vs dtype=bf16")
        assert "diverge: model(**inputs)  vs  dtype=bfloat16" in bf16
        assert "second run: a bfloat16 copy of LlamaForCausalLM (" in bf16
        assert re.search(r"^(first divergence: \S+ \(\w+\), call #\d+|no divergence: \d+ module calls compared)",
                         bf16, re.M)
        eager = s.run("diverge model(**inputs) --vs attn_implementation=eager")
        assert "with attn_implementation=eager (was sdpa; restored afterwards)" in eager
        assert "* model.layers.1.self_attn output[1] only in run 2" in eager   # eager's attention weights
        assert s.run("diverge model(**inputs) --vs dtype=int3").strip() == (
            "*** diverge: unknown dtype 'int3' (one of float32, bfloat16, float16, float64)")
        state = s.run("p (model.dtype, model.config._attn_implementation, torch.is_grad_enabled(), "
                      "torch.equal(rng0, torch.get_rng_state()), inputs['input_ids'].dtype, "
                      "sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules()))")
        assert state.strip().splitlines()[-1] == "(torch.float32, 'sdpa', True, True, torch.int64, 0)"
        s.child.sendline("diverge model(**inputs) --vs dtype=bf16 --rtol 1e-3 --atol 1e-3 --break")
        s.child.expect(r"\(\(llmpdb\)\) ")     # the recursive debugger, stopped in the diverging module
        stop = clean(s.child.before)
        assert "ENTERING RECURSIVE DEBUGGER" in stop and "diverge --break: " in stop
        module = re.search(r"^first divergence: (\S+) \((\w+)\)", stop, re.M).group(2)
        s.child.sendline("p type(self).__name__")
        s.child.expect(r"\(\(llmpdb\)\) ")
        assert repr(module) in clean(s.child.before)
        assert "LEAVING RECURSIVE DEBUGGER" in s.run("c")
        s.run("c")
        s.run("c")
        rest = s.finish("c")
        assert "done" in rest
        assert s.exitstatus == 0
