"""Drive one architecture through llmpdb's commands in one in-process debugger session; keep what each
command printed, and the truth computed without llmpdb (forward hooks, the config, the state dict).

Usage::

    run = zoo_run(model, spec)     # a ZooRun
    run.outputs["kv"]              # what `kv` printed at the stop after the forward
    run.truth["nan_module"]        # the first module (forward hooks) whose output holds a NaN
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn
from transcript import debug_transcript, outputs_of, run_post_mortem

from .zoo_models import VOCAB

WIDTH = 80


def offline_tokenizer():
    """A word-level ``PreTrainedTokenizerFast`` over ``VOCAB`` ids: ``<pad>`` 0, ``<s>`` 1, ``</s>`` 2, then
    ``t3`` … ``t95``; built in code."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, **{f"t{i}": i for i in range(3, VOCAB)}}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", bos_token="<s>",
                                   eos_token="</s>")


def _logits(out):
    return out["logits"]


def scenario(model, inputs, prefixed, tokenizer):
    """The program the debugger runs: stops before the forward, after it, after a backward."""
    input_ids = inputs["input_ids"]
    ids = input_ids.clone()  # noqa: F841 (a name llmpdb has no rule for: named from sizes alone)
    breakpoint()
    out = model(**inputs)
    breakpoint()
    _logits(out).float().sum().backward()
    breakpoint()
    model.zero_grad(set_to_none=True)
    return out


def nan_scenario(model, inputs):
    """Two forwards: the first stops at the first bad block, the second inside it at the first bad module."""
    breakpoint()
    with torch.no_grad():
        model(**inputs)
        model(**inputs)


def misfed(model, layer, width):
    """Feed ``layer`` (a Linear of ``model``) a last dim one too wide: what `explain` must explain."""
    hidden = torch.zeros(2, 4, width)
    return layer(hidden)


@dataclass
class ZooRun:
    model: object = None
    outputs: dict = field(default_factory=dict)
    truth: dict = field(default_factory=dict)
    transcripts: dict = field(default_factory=dict)


def first_nan_module(model, inputs) -> str | None:
    """The first module call (in completion order, as forward hooks see them) whose output holds a NaN/Inf."""
    names = {id(m): n for n, m in model.named_modules()}
    found: list[str] = []

    def hook(module, args, output):
        if isinstance(output, torch.Tensor):
            tensors = [output]
        else:
            items = output.values() if isinstance(output, dict) else output if isinstance(output, (tuple, list)) else []
            tensors = [t for t in items if isinstance(t, torch.Tensor)]
        if not found and any(t.is_floating_point() and not torch.isfinite(t).all() for t in tensors):
            found.append(names[id(module)])

    handles = [m.register_forward_hook(hook) for m in model.modules()]
    try:
        with torch.no_grad():
            model(**inputs)
    finally:
        for h in handles:
            h.remove()
    return found[0] if found else None


def grads_truth(model, inputs) -> tuple[int, int]:
    """(trainable parameters, those holding a gradient after one backward), counted by torch."""
    model.zero_grad(set_to_none=True)
    _logits(model(**inputs)).float().sum().backward()
    params = [p for p in model.parameters() if p.requires_grad]
    with_grad = sum(p.grad is not None for p in params)
    model.zero_grad(set_to_none=True)
    return len(params), with_grad


def cache_layers(model, inputs) -> list[tuple[str, tuple | None]]:
    """Each attention cache layer's kind (``sliding`` / ``full``) and keys' shape, read off the cache
    object transformers returns (its layer classes), not off llmpdb."""
    with torch.no_grad():
        out = model(**inputs)
    cache = out.get("past_key_values") if isinstance(out, dict) else getattr(out, "past_key_values", None)
    layers = getattr(getattr(cache, "self_attention_cache", cache), "layers", None) or []
    found = []
    for layer in layers:
        keys = getattr(layer, "keys", None)
        if isinstance(keys, torch.Tensor) and keys.dim() == 4:
            found.append(("sliding" if "Sliding" in type(layer).__name__ else "full", tuple(keys.shape)))
        else:
            found.append(("linear", None))
    return found


def module_calls(model, inputs) -> int:
    """How many module calls one forward makes (forward hooks on every module)."""
    calls = []
    handles = [m.register_forward_hook(lambda *a: calls.append(1)) for m in model.modules()]
    try:
        with torch.no_grad():
            model(**inputs)
    finally:
        for h in handles:
            h.remove()
    return len(calls)


def target_linear(model) -> tuple[str, nn.Linear]:
    """The first ``nn.Linear`` of the model's last numbered layer (or the first Linear at all)."""
    linears = [(n, m) for n, m in model.named_modules() if type(m) is nn.Linear]
    numbered = [(n, m) for n, m in linears if ".1." in f".{n}."]
    return (numbered or linears)[0]


def zoo_run(model, spec) -> ZooRun:
    run = ZooRun(model=model)
    inputs = spec.inputs()
    prefixed = {"module." + k: v for k, v in model.state_dict().items()}
    run.truth["state_keys"] = len(model.state_dict())
    tokenizer = offline_tokenizer()
    attention = spec.attention_class
    commands = ["c", "trace model(**inputs)", "statediff model prefixed"]
    if attention:
        commands += [f"bm {attention} --once", "c", "stack-model", "shapes"]
    commands += ["c", "shapes", "kv", "tokens", "c", "grads", "c"]
    text = debug_transcript(scenario, commands, model, inputs, prefixed, tokenizer, width=WIDTH)
    run.transcripts["main"] = text
    chunks = outputs_of(text)
    names = commands[1:]
    stops = iter(chunks)
    keyed = {}
    order = []
    for name in names:
        key = name.split()[0]
        if key == "shapes" and "stack-model" in order and "attn_shapes" not in keyed:
            key = "attn_shapes"
        order.append(key)
        keyed[key] = next(stops, "")
    run.outputs.update(keyed)
    run.truth["grads"] = grads_truth(model, inputs)
    run.truth["cache_layers"] = cache_layers(model, inputs)
    run.truth["calls"] = module_calls(model, inputs)
    run.truth["attention_path"] = next((n for n, m in model.named_modules()
                                        if attention and type(m).__name__ == attention), None)
    # nan-break
    name, layer = target_linear(model)
    run.truth["linear"] = (name, layer.in_features)
    saved = layer.weight.detach().clone()
    try:
        with torch.no_grad():
            layer.weight[0, 0] = float("nan")
        run.truth["nan_module"] = first_nan_module(model, inputs)
        text = debug_transcript(nan_scenario, ["c", "nan-break", "c", "stack-model", "c"], model, inputs,
                                width=WIDTH)
        run.transcripts["nan"] = text
        nan = outputs_of(text)
        run.outputs["nan-break"] = "\n".join(nan[:2])
        text = debug_transcript(nan_scenario, ["c", "nan-break --blocks", "c", "c", "c"], model, inputs,
                                width=WIDTH)
        run.transcripts["nan blocks"] = text
        run.outputs["nan-break --blocks"] = outputs_of(text)
    finally:
        with torch.no_grad():
            layer.weight.copy_(saved)
    text = debug_transcript(run_post_mortem, ["c", "explain", "c"], misfed, model, layer, layer.in_features + 1,
                            width=WIDTH)
    run.transcripts["explain"] = text
    run.outputs["explain"] = outputs_of(text)[0] if outputs_of(text) else ""
    return run
