"""A tiny DDP training job for llmpdb under torchrun: gloo on the CPU, a few steps, one breakpoint() every
rank reaches.

Usage::

    torchrun --nproc-per-node 2 -m llmpdb examples/ddp_train.py          # rank 0 stops at line 1 first
    PYTHONBREAKPOINT=llmpdb.set_trace torchrun --nproc-per-node 2 examples/ddp_train.py

At the breakpoint (first step, after the loss) only rank 0 prompts, ``(llmpdb r0)``; rank 1 waits at the
same line and resumes when rank 0 continues. Environment: ``DDP_TIMEOUT`` (seconds, default 1800) is the
process group's timeout: a pause at the prompt longer than it is harmless, since waiting ranks wait through
the c10d store, not a collective. ``DDP_STEPS`` (default 3) steps. ``DDP_LATE_RANK=0`` makes rank 0 reach the first breakpoint ``DDP_LATE_SECONDS`` (8) after the others.
``DDP_BREAK=0`` leaves that breakpoint out. ``DDP_LONE_RANK=1`` adds a breakpoint
after training that only rank 1 reaches; ``DDP_FAIL_RANK=1`` makes rank 1 raise after training. ``DDP_HANG=1`` makes the job hang after training: rank 0 in an
all-reduce that rank 1 never joins, rank 1 in a loop waiting for a file; ``python -m llmpdb ranks --job``
from another terminal shows both.
"""

import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


class TinyNet(nn.Module):
    def __init__(self, width: int = 8):
        super().__init__()
        self.encoder = nn.Linear(4, width)
        self.head = nn.Linear(width, 1)

    def forward(self, x):
        return self.head(torch.relu(self.encoder(x)))


def main() -> None:
    timeout = timedelta(seconds=float(os.environ.get("DDP_TIMEOUT", "1800")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DistributedDataParallel(TinyNet())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(rank)
    for step in range(int(os.environ.get("DDP_STEPS", "3"))):
        batch = torch.randn(16, 4, generator=generator)
        target = batch.sum(dim=1, keepdim=True)
        loss = nn.functional.mse_loss(model(batch), target)
        if step == 0 and os.environ.get("DDP_BREAK", "1") != "0":
            if rank == int(os.environ.get("DDP_LATE_RANK", "-1")):
                time.sleep(float(os.environ.get("DDP_LATE_SECONDS", "8")))  # arrives after the others
            breakpoint()  # every rank: rank 0 prompts, the others wait here
        optimizer.zero_grad()
        loss.backward()  # an all-reduce of the gradients: every rank must be here
        optimizer.step()
    if rank == int(os.environ.get("DDP_LONE_RANK", "-1")):
        breakpoint()  # this rank only
    if rank == int(os.environ.get("DDP_FAIL_RANK", "-1")):
        raise RuntimeError(f"rank {rank} fails on purpose (DDP_FAIL_RANK)")
    if os.environ.get("DDP_HANG") == "1":  # a hung job: rank 0 waits in an all-reduce rank 1 never joins
        if rank == 0:
            dist.all_reduce(loss.detach())
        else:
            while not os.path.exists(os.environ.get("DDP_HANG_UNTIL", os.devnull + ".never")):
                time.sleep(0.05)
    print(f"rank {rank}/{world}: done, loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
