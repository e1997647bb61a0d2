import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.heads = heads
        self.ln = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        h = self.ln(x)
        q, k, v = self.qkv(h).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).reshape(b, s, d)
        return x + self.proj(y)


class TinyGPT(nn.Module):
    def __init__(self, vocab=50, dim=32, layers=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList([Block(dim) for _ in range(layers)])
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx):
        x = self.emb(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def main():
    torch.manual_seed(0)
    model = TinyGPT().eval()
    idx = torch.randint(0, 50, (2, 7))
    logits = model(idx)
    print("done", tuple(logits.shape))


if __name__ == "__main__":
    main()
