"""inspect.memory on real tensors: views and shared storage counted once, meta tensors 0 bytes, CUDA left
alone when this process has not initialised it, optimizers found by type."""

from __future__ import annotations

import torch

from llmpdb.inspect.memory import (Holding, cuda_memory, find_optimizers, largest_tensors, model_holdings,
                                  optimizer_holdings, storage_key, tensor_bytes)


def test_cuda_memory_is_none_and_cuda_stays_uninitialised():
    assert not torch.cuda.is_initialized()
    assert cuda_memory() is None
    assert not torch.cuda.is_initialized()


def test_views_and_shared_storage_count_once_under_the_first_path():
    big = torch.zeros(100, 8)
    flat = big.view(-1)
    row = big[3]
    other = torch.ones(50, dtype=torch.float16)
    planned = torch.empty(10, 10, device="meta")
    rows, storages, total, notes = largest_tensors(
        {"big": big, "pair": (flat, row), "other": other, "planned": planned}, top=10)
    assert [(r.path, r.nbytes, r.shared) for r in rows] == [
        ("big", 100 * 8 * 4, ("pair[0]", "pair[1]")), ("other", 50 * 2, ()), ("planned", 0, ())]
    assert rows[2].meta and rows[2].device == "meta"
    assert storages == 3 and total == 3200 + 100 and notes == []


def test_a_slice_holds_its_whole_storage():
    base = torch.zeros(1000)
    rows, *_ = largest_tensors({"part": base[:10]}, top=1)
    assert rows[0].nbytes == 4000 and rows[0].shape == (10,)


def test_tensor_bytes_and_storage_key_are_metadata():
    t = torch.zeros(4, 4, dtype=torch.bfloat16)
    assert tensor_bytes(t) == 32
    assert tensor_bytes(torch.empty(4, device="meta")) == 0
    assert storage_key(t) == storage_key(t[1:]) and storage_key(torch.empty(4, device="meta")) is None


def test_find_optimizers_by_type():
    w = torch.nn.Parameter(torch.zeros(3))
    opt = torch.optim.SGD([w], lr=0.1)

    class LooksLikeOne:
        param_groups = []
        state = {}

    found = find_optimizers({"opt": opt, "again": opt, "fake": LooksLikeOne(), "n": 3})
    assert found == [("opt", opt)]


def test_an_optimizer_held_by_self_is_found():
    w = torch.nn.Parameter(torch.zeros(3))

    class Trainer:
        def __init__(self):
            self.optimizer = torch.optim.SGD([w], lr=0.1)

    trainer = Trainer()
    assert find_optimizers({"self": trainer}) == [("self.optimizer", trainer.optimizer)]


def test_a_model_whose_parameters_raise_is_a_question_mark_not_a_guess():
    class Broken(torch.nn.Module):
        def parameters(self, recurse=True):
            raise RuntimeError("no")

    rows = model_holdings([("m", Broken()), ("n", 3)])
    assert rows == [Holding("model", "m (Broken)", None, "? (RuntimeError)")]


def test_model_and_optimizer_bytes_after_a_step():
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.Adam(model.parameters())
    model(torch.ones(2, 4)).sum().backward()
    opt.step()
    rows = model_holdings([("model", model)]) + optimizer_holdings([("opt", opt)])
    assert [(r.kind, r.nbytes) for r in rows] == [("model", 15 * 4), ("gradients", 15 * 4),
                                                  ("optimizer", 2 * 15 * 4 + 2 * 4)]  # exp_avg(_sq) + steps
    assert rows[1].detail == "2 of 2 parameters have .grad"
