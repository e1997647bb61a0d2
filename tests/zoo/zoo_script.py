"""A script for the zoo's pty sessions: ``python -m llmpdb tests/zoo/zoo_script.py ARCH``.

Builds the zoo architecture ARCH (or ``nanogpt``: a GPT defined in this very script, the teaching setup),
stops at ``breakpoint()`` before and after one forward with a cache.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
sys.path.append(os.path.dirname(HERE))

import torch  # noqa: E402
from torch import nn  # noqa: E402


class CausalSelfAttention(nn.Module):
    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(dim, 3 * dim)
        self.c_proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(b, s, d))


class NanoGPT(nn.Module):
    def __init__(self, vocab=96, dim=32, layers=2):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.h = nn.ModuleList(CausalSelfAttention(dim) for _ in range(layers))
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, input_ids):
        x = self.wte(input_ids)
        for block in self.h:
            x = x + block(x)
        return self.lm_head(x)


def main(arch):
    if arch == "nanogpt":
        torch.manual_seed(0)
        model = NanoGPT().eval()
        inputs = {"input_ids": torch.randint(3, 96, (2, 4))}
    else:
        from zoo.zoo_models import ARCHS

        spec = ARCHS[arch]
        model = spec.build()
        inputs = spec.inputs()
    breakpoint()
    with torch.no_grad():
        out = model(**inputs)
    breakpoint()
    return out


if __name__ == "__main__":
    main(sys.argv[1])
