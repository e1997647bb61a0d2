"""A tiny Llama whose attention skips repeat_kv, run without a handler: the e2e script of post-mortem ``explain``."""

import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402

from explain_models import broken_gqa_llama  # noqa: E402

model = broken_gqa_llama()
with torch.no_grad():
    model(torch.ones(1, 7, dtype=torch.long))
