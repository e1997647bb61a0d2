"""Tests of llmpdb.inspect.modules (and frame_kinds): module frames on real stacks of tiny models."""

from __future__ import annotations

import functools
import sys

import pytest
import torch
from torch import nn

from llmpdb.inspect.frame_kinds import TensorArg, is_plumbing, short_dtype
from llmpdb.inspect.modules import (ModuleFrame, StackEntry, frame_stack, is_forward_frame, is_module,
                                    model_names, model_stack, module_frames, unwrap_model)
from llmpdb.render.modules import module_label, render_model_stack
from tiny_models import PlainAttention, plain_model, tiny_gpt2, tiny_llama, tiny_t5


def stack_at(hooked: nn.Module, run, root=None, frame_offset: int = 1):
    """Run ``run()``; when ``hooked`` is about to be called, return the model stack seen from there.

    The stack is cut at this helper's caller (pytest's frames are not part of the picture) and ends at
    torch's call machinery that runs the hook, like a debugger stop inside the parent's forward."""
    captured = []
    top = sys._getframe(1)

    def hook(module, args):
        if not captured:
            stack = frame_stack(sys._getframe(frame_offset))
            start = next(i for i, (f, _) in enumerate(stack) if f is top)
            captured.append(model_stack(stack[start:], root))

    handle = hooked.register_forward_pre_hook(hook)
    try:
        run()
    finally:
        handle.remove()
    assert captured, "the hooked module was never called"
    return captured[0]


def rows(entries):
    return [(e.module.qualname, e.module.class_name) for e in entries if e.module is not None]


def test_llama_generate_prefill_stack_names_and_hidden_plumbing():
    model = tiny_llama()
    ids = torch.tensor([[1, 2, 3, 4, 5, 6, 7]])
    with torch.no_grad():
        entries = stack_at(model.model.layers[1].self_attn.q_proj,
                           lambda: model.generate(ids, max_new_tokens=1, do_sample=False))
    assert rows(entries) == [("", "LlamaForCausalLM"), ("model", "LlamaModel"),
                             ("model.layers.1", "LlamaDecoderLayer"),
                             ("model.layers.1.self_attn", "LlamaAttention")]
    modules = [e.module for e in entries if e.module]
    assert [m.index for m in modules] == [i for i, e in enumerate(entries) if e.module]
    assert modules[0].first_tensor == TensorArg("input_ids", (1, 7), "i64")
    assert modules[-1].first_tensor.summary() == "hidden_states (1, 7, 64) f32"
    assert all(m.func == "forward" and m.filename.endswith("modeling_llama.py") for m in modules)
    hidden = {e.func.rsplit(".", 1)[-1] for e in entries if e.hidden}
    assert {"_call_impl", "_wrapped_call_impl", "wrapped_func", "generate", "_sample"} <= hidden
    visible = [e for e in entries if not e.hidden]
    assert [e.func.rsplit(".", 1)[-1] for e in visible if e.module is None] == [
        "test_llama_generate_prefill_stack_names_and_hidden_plumbing", "stack_at", "<lambda>"]


def test_gpt2_t5_and_plain_model_names():
    gpt2 = tiny_gpt2()
    with torch.no_grad():
        entries = stack_at(gpt2.transformer.h[1].attn.c_attn, lambda: gpt2(torch.tensor([[1, 2, 3]])))
    assert rows(entries) == [("", "GPT2LMHeadModel"), ("transformer", "GPT2Model"),
                             ("transformer.h.1", "GPT2Block"), ("transformer.h.1.attn", "GPT2Attention")]

    t5 = tiny_t5()
    with torch.no_grad():
        entries = stack_at(t5.decoder.block[0].layer[1].EncDecAttention.q,
                           lambda: t5(input_ids=torch.tensor([[5, 6, 7]]), decoder_input_ids=torch.tensor([[0, 5]])))
    assert rows(entries)[1:] == [("decoder", "T5Stack"), ("decoder.block.0", "T5Block"),
                                 ("decoder.block.0.layer.1", "T5LayerCrossAttention"),
                                 ("decoder.block.0.layer.1.EncDecAttention", "T5Attention")]

    plain = plain_model()
    with torch.no_grad():
        entries = stack_at(plain.blocks[1].qkv, lambda: plain(torch.tensor([[1, 2, 3]])))
    assert rows(entries) == [("", "PlainLM"), ("blocks.1", "PlainAttention")]
    assert entries[-1].hidden  # torch's call machinery that runs the hook
    block = [e.module for e in entries if e.module][-1]
    assert block.first_tensor.summary() == "x (1, 3, 32) f32"


class SharedEmbeddingModel(nn.Module):
    """One embedding registered three times: ``shared``, ``encoder.embed`` and ``decoder.embed``."""

    def __init__(self):
        super().__init__()
        self.shared = nn.Embedding(16, 8)
        self.encoder = nn.Sequential()
        self.encoder.embed = self.shared
        self.decoder = nn.Sequential()
        self.decoder.embed = self.shared
        self.decoder.proj = nn.Linear(8, 8)

    def forward(self, ids):
        return self.decoder.proj(self.decoder.embed(ids) + self.encoder.embed(ids))


def test_shared_module_shows_every_name_and_the_one_on_this_path():
    model = SharedEmbeddingModel()
    names = model_names(model)
    assert names.names_of(model.shared) == ["shared", "encoder.embed", "decoder.embed"]
    record = ModuleFrame(index=3, qualname="decoder.embed", class_name="Embedding", func="forward",
                         filename="sparse.py", lineno=1, names=("shared", "encoder.embed", "decoder.embed"))
    assert module_label(record) == "decoder.embed (also shared, encoder.embed)"
    with torch.no_grad():
        entries = stack_at(model.decoder.proj, lambda: model(torch.tensor([[1, 2]])))
    assert rows(entries) == [("", "SharedEmbeddingModel")]


class Runner:
    """Not a module: its frames show as code, never as module rows."""

    def __init__(self, model):
        self.model = model

    def step(self, ids):
        return self.model(ids)


class Helper(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(4, 4)

    def forward(self, x):
        return self.compute(x)

    def compute(self, x):  # a module method that is not forward: code, not a module row
        return self.inner(x)


def test_frames_whose_self_is_not_a_module_or_not_forward():
    helper = Helper()
    runner = Runner(helper)
    entries = stack_at(helper.inner, lambda: runner.step(torch.ones(1, 4)))
    assert rows(entries) == [("", "Helper")]
    code = [e.func for e in entries if e.module is None and not e.hidden]
    assert "Runner.step" in code and "Helper.compute" in code


def no_wraps(func):
    def wrapper(*args, **kwargs):  # no functools.wraps: the qualified-name fallback must find forward
        return func(*args, **kwargs)
    return wrapper


def with_wraps(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)
    return wrapper


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    @with_wraps
    def forward(self, x):
        return self.lin(x)


class Sub(Base):
    @no_wraps
    def forward(self, x):
        return super().forward(x) + 1


def test_decorated_forward_and_super_call():
    model = nn.Sequential(Sub())
    entries = stack_at(model[0].lin, lambda: model(torch.ones(1, 4)))
    assert [(m.qualname, m.func) for m in (e.module for e in entries) if m] == [
        ("", "forward"), ("0", "forward"), ("0", "Base.forward")]
    # Decorator wrappers (any closure over the function it calls) are plumbing, wherever they live.
    wrappers = [e for e in entries if e.func.endswith("wrapper")]
    assert len(wrappers) == 2 and all(e.hidden for e in wrappers)


class DDPLike(nn.Module):
    """Like DistributedDataParallel: the wrapped model is the only child, at ``.module``."""

    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)


def test_ddp_like_wrapper_names_the_wrapped_model():
    plain = plain_model()
    wrapped = DDPLike(plain)
    inner, chain = unwrap_model(wrapped)
    assert inner is plain and [(kind, attr) for _, kind, attr in chain] == [("DDP", "module")]
    with torch.no_grad():
        entries = stack_at(plain.blocks[0].qkv, lambda: wrapped(torch.tensor([[1, 2]])))
    modules = [e.module for e in entries if e.module]
    assert [(m.qualname, m.wrapper, m.tree) for m in modules] == [("", "DDP", 0), ("", None, 0),
                                                                  ("blocks.0", None, 0)]
    assert [module_label(m) for m in modules] == ["(DDP wrapper)", "(root)", "blocks.0"]


def test_torch_compile_wrapper_is_looked_through_without_compiling():
    model = tiny_llama()
    compiled = torch.compile(model)
    names = model_names(compiled)
    assert names.naming_root is model
    assert names.wrappers == {id(compiled): "torch.compile"}
    assert names.names_of(model.model.layers[1].self_attn) == ["model.layers.1.self_attn"]


class LoraModelLike(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.peft_config = {"default": "lora"}
        self.model = model


class PeftModelLike(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.peft_config = {"default": "lora"}
        self.base_model = LoraModelLike(model)


def test_peft_like_wrapper_drops_base_model_model_prefix():
    model = tiny_llama()
    peft = PeftModelLike(model)
    names = model_names(peft)
    assert names.naming_root is model
    assert names.names_of(model.model.layers[0].mlp) == ["model.layers.0.mlp"]
    assert sorted(names.wrappers.values()) == ["PEFT", "PEFT tuner"]


class Outer(nn.Module):
    """Calls a second model that is not its submodule (a teacher, a reward model)."""

    def __init__(self, other):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self._other = [other]

    def forward(self, x):
        return self._other[0](self.proj(x))


def test_two_models_on_the_stack_and_a_root_set_by_the_user():
    teacher = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    outer = Outer(teacher)
    entries = stack_at(teacher[1], lambda: outer(torch.ones(1, 4)))
    modules = [e.module for e in entries if e.module]
    assert [(m.qualname, m.class_name, m.tree) for m in modules] == [("", "Outer", 0), ("", "Sequential", 1)]
    assert module_label(modules[1]) == "[2] (root)"
    entries = stack_at(teacher[1], lambda: outer(torch.ones(1, 4)), root=teacher)
    modules = [e.module for e in entries if e.module]
    assert [(m.class_name, m.tree) for m in modules] == [("Outer", 1), ("Sequential", 0)]


def test_small_helpers():
    assert short_dtype(torch.bfloat16) == "bf16" and short_dtype(torch.float8_e4m3fn) == "f8e4m3"  # one dtype table for every command
    assert is_module(nn.Linear(2, 2)) and not is_module(nn.Linear) and not is_module(object())
    assert TensorArg("x", (5,), "f32", "cuda:0").summary() == "x (5,) f32 cuda:0"
    attention = PlainAttention()
    frame = sys._getframe()
    assert not is_forward_frame(frame, attention) and not is_plumbing(frame)
    meta = torch.empty(2, 3, device="meta")
    holder = nn.Sequential(nn.Identity())
    out = stack_at(holder[0], lambda: holder(meta))  # meta tensors: metadata only, never data
    assert [e.module.first_tensor for e in out if e.module] == [TensorArg("input", (2, 3), "f32", "meta")]


def entry(index, func, where, line, hidden=False, module=None):
    return StackEntry(index=index, func=func, filename=f"/x/{where}", lineno=line, hidden=hidden, module=module)


def frame(index, qualname, cls, line, tensor, **kw):
    return ModuleFrame(index=index, qualname=qualname, class_name=cls, func=kw.pop("func", "forward"),
                       filename="/x/modeling_llama.py", lineno=line, first_tensor=tensor, **kw)


def synthetic_stack():
    ids = TensorArg("input_ids", (1, 7), "i64")
    hidden = TensorArg("hidden_states", (1, 7, 64), "f32")
    return [
        entry(0, "<module>", "infer.py", 40),
        entry(1, "main", "infer.py", 31),
        entry(2, "Module._call_impl", "module.py", 1789, hidden=True),
        entry(3, "LlamaForCausalLM.forward", "modeling_llama.py", 459,
              module=frame(3, "", "LlamaForCausalLM", 459, ids)),
        entry(4, "Module._call_impl", "module.py", 1789, hidden=True),
        entry(5, "LlamaDecoderLayer.forward", "modeling_llama.py", 299,
              module=frame(5, "model.layers.1", "LlamaDecoderLayer", 299, hidden)),
        entry(6, "deprecate_kwarg.<locals>.wrapper.<locals>.wrapped_func", "deprecation.py", 173, hidden=True),
        entry(7, "LlamaAttention.forward", "modeling_llama.py", 241,
              module=frame(7, "model.layers.1.self_attn", "LlamaAttention", 241, hidden)),
    ]


def test_render_model_stack_exact():
    text = render_model_stack(synthetic_stack(), current=7, width=110)
    assert text == (
        "  #  module / code             class              at                     first tensor\n"
        " #0  <module>()                                   infer.py:40\n"
        " #1  main()                                       infer.py:31\n"
        " #3  (root)                    LlamaForCausalLM   modeling_llama.py:459  input_ids (1, 7) i64\n"
        " #5  model.layers.1            LlamaDecoderLayer  modeling_llama.py:299  hidden_states (1, 7, 64) f32\n"
        ">#7  model.layers.1.self_attn  LlamaAttention     modeling_llama.py:241  hidden_states (1, 7, 64) f32\n"
        "(3 plumbing frames hidden: stack-model --all shows them)"
    )
    # At 100 columns the tensor names go first.
    lines = render_model_stack(synthetic_stack(), current=7, width=100).splitlines()
    assert lines[3] == " #3  (root)                    LlamaForCausalLM   modeling_llama.py:459  (1, 7) i64"


def test_render_model_stack_narrow_and_all():
    lines = render_model_stack(synthetic_stack(), current=5, width=70, show_all=True).splitlines()
    assert lines == [
        "  #  module / code             at",
        " #0  <module>()                infer.py:40",
        " #1  main()                    infer.py:31",
        " #2  _call_impl()              module.py:1789",
        " #3  (root)                    modeling_llama.py:459",
        " #4  _call_impl()              module.py:1789",
        ">#5  model.layers.1            modeling_llama.py:299",
        " #6  wrapped_func()            deprecation.py:173",
        " #7  model.layers.1.self_attn  modeling_llama.py:241",
    ]
    lines = render_model_stack(synthetic_stack(), current=5, width=40).splitlines()
    # The module column is cut in the middle down to 12 characters, then the file:line column to 20.
    assert lines[4] == ">#5  model.…yers.1  modeling_…ama.py:299"
    assert lines[5] == " #7  model.…f_attn  modeling_…ama.py:241"
    assert max(len(line) for line in lines) <= 40


def test_a_user_folder_named_llmpdb_is_not_plumbing(tmp_path):
    """A ``git clone`` of llmpdb is a folder named ``llmpdb/``: the user's scripts there are theirs, and only
    the package's own files (by its real location) are llmpdb's plumbing."""
    import sys as _sys

    from llmpdb.inspect import frame_kinds

    folder = tmp_path / "llmpdb"
    folder.mkdir()
    code = compile("def user():\n    return _getframe()\n", str(folder / "train.py"), "exec")
    namespace = {"_getframe": _sys._getframe}
    exec(code, namespace)
    assert not is_plumbing(namespace["user"]())
    own = compile("def own():\n    return _getframe()\n", frame_kinds.__file__, "exec")
    exec(own, namespace)
    assert is_plumbing(namespace["own"]())
