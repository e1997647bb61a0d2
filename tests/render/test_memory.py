"""render.memory at a fixed width: the CUDA table from records built of numbers, the tensor and holding
tables, and the narrow-width fallbacks."""

from __future__ import annotations

from llmpdb.inspect.memory import DeviceMemory, Holding, MemoryReport, TensorBytes
from llmpdb.render.memory import render_cuda, render_memory
from llmpdb.render.style import visible_len


def test_cuda_rows_from_numbers():
    cuda = (DeviceMemory("cuda:0", 3 * 2**30, 4 * 2**30 + 2**29, 7 * 2**30),
            DeviceMemory("cuda:1", 512, 2**20, 2048))
    assert render_cuda(cuda) == [
        "device  allocated  reserved     peak\n"
        "cuda:0    3.0 GiB   4.5 GiB  7.0 GiB\n"
        "cuda:1      512 B   1.0 MiB  2.0 KiB"]
    assert render_cuda(None) == ["CUDA: not in use (torch.cuda is not initialised)"]
    assert render_cuda(()) == ["CUDA: initialised, no devices"]


def _report():
    tensors = (TensorBytes("outputs.past_key_values.layers[0].keys", (1, 8, 4096, 128), "bf16", "cuda:0",
                           8 * 4096 * 128 * 2, shared=("k", "k_view")),
               TensorBytes("planned", (10, 10), "f32", "meta", 0, meta=True))
    holdings = (Holding("model", "model (LlamaForCausalLM)", 2**30, "params 1.0 GiB (536,870,912 elements)"),)
    return MemoryReport(None, tensors, holdings, storages=2, total_bytes=8 * 4096 * 128 * 2)


def test_the_whole_report_at_120_columns():
    text = render_memory(_report(), width=120)
    assert text.splitlines()[2] == ("largest tensors in this frame: 2 of 2 storages, 8.0 MiB in all "
                                    "(views and shared storage counted once)")
    assert text.splitlines()[4] == ("outputs.past_key_values.layers[0].keys  (1, 8, 4096, 128)  bf16   cuda:0"
                                    "  8.0 MiB  k, k_view")
    assert text.splitlines()[5].split() == ["planned", "(10,", "10)", "f32", "meta", "meta"]
    assert text.splitlines()[-1].split()[:4] == ["model", "model", "(LlamaForCausalLM)", "1.0"]


def test_a_narrow_width_cuts_paths_and_hides_columns():
    text = render_memory(_report(), width=50)
    lines = text.splitlines()
    assert "(columns hidden to fit 50: also, device)" in lines
    assert lines[2] == "largest tensors: 2 of 2 storages, 8.0 MiB in all"
    assert lines[-2].split() == ["model", "model", "(…ausalLM)", "1.0", "GiB"]
    for line in lines:
        assert visible_len(line) <= 50, line
    assert any("…" in line for line in lines)


def test_two_different_paths_never_print_the_same_cut_name():
    tensors = tuple(TensorBytes(f"outputs.past_key_values.layers[{i}].keys", (1, 8, 4096, 128), "bf16", "cuda:0",
                                8 * 4096 * 128 * 2) for i in (10, 11, 12))
    report = MemoryReport(None, tensors, (), storages=3, total_bytes=3 * 8 * 4096 * 128 * 2)
    for width in (60, 70, 80):
        rows = [line.split("  ")[0] for line in render_memory(report, width=width).splitlines()
                if "(1, 8, 4096, 128)" in line]
        assert len(rows) == 3 and len(set(rows)) == 3, (width, rows)
    more = tuple(TensorBytes(f"model.model.layers.{i}.self_attn.q_proj.weight", (64, 64), "f32", "cpu", 64 * 64 * 4)
                 for i in (0, 1))
    report = MemoryReport(None, tensors + more, (), storages=5, total_bytes=10)
    for width in (40, 50, 60):
        rows = [line.split("  ")[0] for line in render_memory(report, width=width).splitlines()
                if "(1, 8, 4096, 128)" in line or "(64, 64)" in line]
        assert len(rows) == 5 and len(set(rows)) == 5, (width, rows)
