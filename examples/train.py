"""A few training steps on a tiny random Llama, then a checkpoint saved with torch.save.

Usage::

    python -m llmpdb examples/train.py [OUT_DIR]           # stop before the first backward and at the save
    PYTHONBREAKPOINT=0 python examples/train.py [OUT_DIR]  # run straight through

The checkpoint goes to ``OUT_DIR/checkpoint.pt`` (default: a new temporary directory, never the repo).
The token embedding is frozen (``requires_grad_(False)``): it is the same in the checkpoint as at the
start, while every other weight moves. Same seed, same batch: the losses repeat on every run.
"""

from __future__ import annotations

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from tiny import CORPUS, build_model, build_tokenizer  # noqa: E402

STEPS = 3
LEARNING_RATE = 1e-2
TRAIN_TEXTS = [CORPUS[7], CORPUS[8]]  # two sentences of different lengths: the shorter one is padded


def main(argv: list[str]) -> None:
    out_dir = argv[1] if len(argv) > 1 else tempfile.mkdtemp(prefix="llmpdb-train-")
    tokenizer = build_tokenizer()
    tokenizer.padding_side = "right"  # for training; generation pads on the left
    model = build_model(seed=0, tokenizer=tokenizer)
    model.train()
    model.model.embed_tokens.requires_grad_(False)  # frozen: unchanged after training
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=LEARNING_RATE)

    batch = tokenizer(TRAIN_TEXTS, padding=True, return_tensors="pt")
    labels = batch["input_ids"].clone()
    labels[batch["attention_mask"] == 0] = -100  # no loss on padding; the model shifts labels by one itself

    for step in range(STEPS):
        outputs = model(**batch, labels=labels, use_cache=False)
        loss = outputs.loss
        if step == 0:
            breakpoint()  # stop 1, before backward: `shapes` (outputs.logits vs labels, loss); grads still None
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        print(f"step {step}: loss {loss.item():.4f}")

    checkpoint = {
        "model_state_dict": model.state_dict(),
        "optimizer_state_dict": optimizer.state_dict(),
        "step": STEPS,
        "loss": loss.item(),
    }
    path = os.path.join(out_dir, "checkpoint.pt")
    breakpoint()  # stop 2, before torch.save: `shapes checkpoint` (state_dict names and shapes, optimizer state)
    torch.save(checkpoint, path)
    print(f"saved {path}")
    print("done")


if __name__ == "__main__":
    main(sys.argv)
