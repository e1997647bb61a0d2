"""Inference on a tiny random Llama: tokenizer -> model(**inputs) -> model.generate().

Usage::

    python -m llmpdb examples/infer.py          # stop at each breakpoint() below and look around
    PYTHONBREAKPOINT=0 python examples/infer.py  # run straight through

Everything is built offline (see ``tiny.py``): a byte-level BPE tokenizer and a 2-layer Llama with
grouped-query attention (4 query heads, 2 key/value heads, head_dim 16). The weights are random, so the
generated text is gibberish, but it is the same on every run (seeded weights, greedy decoding).
The three ``breakpoint()`` calls sit where the debugging guides put them.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from tiny import PROMPT, build_model, build_tokenizer  # noqa: E402


def main() -> None:
    tokenizer = build_tokenizer()
    model = build_model(seed=0, tokenizer=tokenizer)
    model.eval()

    text = PROMPT
    inputs = tokenizer(text, return_tensors="pt")
    breakpoint()  # stop 1, after the tokenizer: `shapes inputs` (a BatchEncoding: input_ids, attention_mask)

    with torch.no_grad():
        breakpoint()  # stop 2, at the model call: inputs' keys become forward()'s kwargs; `s` steps in
        outputs = model(**inputs)
        breakpoint()  # stop 3, after the call: `shapes outputs` (logits: batch, seq, vocab; the KV cache)
        logits = outputs.logits
        next_token_id = logits[:, -1].argmax(dim=-1)
        generated_ids = model.generate(**inputs, max_new_tokens=3, do_sample=False)

    prompt_length = inputs["input_ids"].shape[1]
    new_ids = generated_ids[0, prompt_length:].tolist()
    assert new_ids[0] == next_token_id.item(), "greedy generate() should start with argmax(logits[:, -1])"
    generated_text = tokenizer.decode(generated_ids[0], skip_special_tokens=True)
    print(f"prompt: {text!r} -> input_ids {inputs['input_ids'][0].tolist()}")
    print(f"new token ids: {new_ids}")
    print(f"generated: {generated_text!r}")
    print("done")


if __name__ == "__main__":
    main()
