"""A two-rank ``accelerate launch --multi_gpu`` job on the CPU (gloo): the e2e script of ``test_accelerate.py``.

Usage::

    PYTHONBREAKPOINT=llmpdb.set_trace ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes 2 \\
        --num_machines 1 --mixed_precision no --dynamo_backend no tests/e2e/accelerate_script.py

Every rank runs a forward of a tiny model that ``Accelerator.prepare`` wrapped in DDP, stops at the
``breakpoint()``, then runs the backward (DDP's gradient all-reduce: it needs every rank) and prints
``rank N/2: done``.
"""

import torch
from accelerate import Accelerator

accelerator = Accelerator()
model = accelerator.prepare(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)))
batch = torch.ones(3, 4) * (accelerator.process_index + 1)
out = model(batch)
breakpoint()  # every rank
out.sum().backward()
print(f"rank {accelerator.process_index}/{accelerator.num_processes}: done "
      f"({type(model).__name__}, {accelerator.distributed_type.value})", flush=True)
