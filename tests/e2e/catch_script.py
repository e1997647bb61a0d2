"""A shape error inside a tiny Llama's forward, handled by the caller: the e2e script of ``catch``."""

import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402

from tiny_models import tiny_llama  # noqa: E402

model = tiny_llama()
wrong = torch.zeros(1, 3, 48)  # hidden_size is 64
breakpoint()
try:
    with torch.no_grad():
        model(inputs_embeds=wrong)
except RuntimeError as exc:
    print("handled:", exc)
print("catch script done")
