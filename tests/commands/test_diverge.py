"""`diverge` under a real llmpdb debugger on a tiny Llama: bf16 against f32, identical runs, a perturbed copy,
another attention kernel, and nothing left behind (hooks, RNG, grad mode, config, inputs, a KV cache)."""

from __future__ import annotations

import copy
import re

import torch
from tiny_models import plain_model, tiny_llama
from transcript import debug_transcript, outputs_of


def inputs_of():
    return {"input_ids": torch.arange(3, 10).unsqueeze(0), "attention_mask": torch.ones(1, 7, dtype=torch.long)}


def program(model, other=None, state=None):
    """Stops once; records what the commands must not change, before and after the stop."""
    inputs = inputs_of()
    before = (torch.get_rng_state().clone(), torch.is_grad_enabled(), model.config._attn_implementation)
    breakpoint()
    after = (torch.get_rng_state().clone(), torch.is_grad_enabled(), model.config._attn_implementation)
    if state is not None:
        state.update(before=before, after=after, dtypes={p.dtype for p in model.parameters()})
    return model


HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_forward_hooks_with_kwargs", "_forward_hooks_always_called",
              "_forward_pre_hooks_with_kwargs")


def no_hooks_left(*models) -> bool:
    """Every hook dict torch keeps on a module is empty (``always_call`` and ``with_kwargs`` keep their own)."""
    return all(not getattr(m, name) for model in models for m in model.modules() for name in HOOK_DICTS)


def called_modules(model) -> int:
    """Modules that run once in a forward: all but containers (a ModuleList is never called)."""
    return sum(1 for m in model.modules() if not isinstance(m, torch.nn.ModuleList))


def run(commands, model, other=None, width=120):
    state = {}
    chunks = outputs_of(debug_transcript(program, ["c", *commands, "c"], model, other, state, width=width))
    return chunks, state


def flat(text: str) -> str:
    """The text with every run of whitespace (a wrapped line's break and indent) as one space."""
    return " ".join(text.split())


def first_divergence(text: str) -> tuple[str, str] | None:
    match = re.search(r"^first divergence: (\S+) \((\w+)\), call #\d+$", text, re.M)
    return (match.group(1), match.group(2)) if match else None


def table(text: str) -> list[list[str]]:
    """The report's table rows split into cells (two spaces or more between cells)."""
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.split()[:2] == ["#", "module"])
    rows = []
    for line in lines[head + 1:]:
        if not re.match(r"^\s*\d+\s", line):
            break
        rows.append(re.split(r"\s{2,}", line.strip()))
    return rows


def test_bf16_copy_against_f32_stops_at_a_module_with_a_plausible_error_and_leaves_the_model_f32():
    model = tiny_llama()
    chunks, state = run(["diverge model(**inputs) --vs dtype=bfloat16"], model)
    text = chunks[0]
    assert text.splitlines()[0] == "diverge: model(**inputs)  vs  dtype=bfloat16"
    assert "second run: a bfloat16 copy of LlamaForCausalLM (" in text and "floating inputs cast" in text
    assert "rtol 0.016, atol 0.01 (f32 vs bf16 defaults)" in text
    where = first_divergence(text)
    assert where is not None
    path, cls = where
    assert dict(model.named_modules())[path].__class__.__name__ == cls
    rows = table(text)
    assert rows[-1][1] == path and rows[-1][-1] == "DIFFERS"
    assert all(r[-1] == "ok" for r in rows[:-1])
    abs_err = float(re.search(r"first differing tensor: \S+ max abs ([\d.e+-]+), max rel", text).group(1))
    assert re.search(r"^    \d+ of \d+ values beyond atol 0.01 \+ rtol 0.016·\|a\|$", text, re.M)
    assert 0.01 < abs_err < 1.0   # beyond atol 0.01, and bf16 rounding of a random tiny Llama stays far below 1
    nonzero = [float(r[3]) for r in rows if r[3] != "0"]
    assert nonzero and all(0 < e < 1.0 for e in nonzero)   # every row: bf16 rounding, none exact, none wild
    assert re.search(r"^origin: (this module|not this module)", text, re.M)
    assert state["dtypes"] == {torch.float32}
    assert no_hooks_left(model)


def test_same_dtype_reports_no_divergence_with_exact_zeros():
    model = tiny_llama()
    chunks, _ = run(["diverge model(**inputs) --vs dtype=float32 --all"], model)
    text = chunks[0]
    assert "second run: the model itself (LlamaForCausalLM is already f32)" in text
    rows = table(text)
    assert len(rows) == called_modules(model)
    assert {r[3] for r in rows} == {"0"} and {r[4] for r in rows} == {"0"}
    assert re.search(r"^no divergence: \d+ module calls compared, every output within tolerance$", text, re.M)
    assert first_divergence(text) is None
    assert no_hooks_left(model)


def test_a_copy_with_one_layer_perturbed_names_exactly_that_layer_as_the_origin():
    model = tiny_llama()
    for layer_path in ("model.layers.1.mlp.down_proj", "model.layers.0.self_attn.k_proj"):
        other = copy.deepcopy(model)
        with torch.no_grad():
            dict(other.named_modules())[layer_path].weight[3, 5] += 0.25
        chunks, _ = run(["diverge model(**inputs) --vs other"], model, other)
        text = chunks[0]
        assert first_divergence(text) == (layer_path, "Linear")
        assert "origin: this module — its inputs were identical, its outputs are not" in text
        assert "second run: other (LlamaForCausalLM, same module tree)" in text
        assert no_hooks_left(model, other)


def test_eager_attention_switches_for_the_second_run_only_and_is_restored():
    model = tiny_llama()
    assert model.config._attn_implementation == "sdpa"
    chunks, state = run(["diverge model(**inputs) --vs attn_implementation=eager --all"], model)
    text = chunks[0]
    assert "with attn_implementation=eager (was sdpa; restored afterwards)" in text
    attn_rows = [r for r in table(text) if r[2] == "LlamaAttention"]
    assert len(attn_rows) == 2 and all(r[-1] == "ok*" for r in attn_rows)
    footnote = next(line for line in text.splitlines() if line.startswith("* "))
    assert footnote == ("* model.layers.0.self_attn output[1] only in run 2; "       # eager's attention weights
                        "model.layers.1.self_attn output[1] only in run 2")
    assert state["after"][2] == "sdpa" and model.config._attn_implementation == "sdpa"
    assert no_hooks_left(model)


def padded_program(model):
    ids = torch.tensor([[0, 0, 0, 5, 6, 7, 8], [3, 4, 5, 6, 7, 8, 9]])   # row 0 left-padded
    inputs = {"input_ids": ids, "attention_mask": (ids != 0).long()}
    breakpoint()
    return model, inputs


def test_a_left_padded_batch_is_compared_where_the_mask_attends_and_padding_differences_are_named():
    model = tiny_llama()
    command = "diverge model(**inputs) --vs attn_implementation=eager --all"
    text = flat(outputs_of(debug_transcript(padded_program, ["c", command, "c"], model))[0])
    # sdpa and eager leave different values at the padded queries; where the mask attends they agree
    assert first_divergence(text) is None and "no divergence: 32 module calls compared" in text
    assert ("note: attention_mask masks 3 of 14 (batch, seq) positions: tensors shaped (batch, seq, …) are compared "
            "where it attends; ") in text
    assert re.search(r"; (\d+) module calls differ at masked positions only", text)
    assert "model.layers.0.self_attn.o_proj output 192 values differ at masked positions only" in text  # 3 · 64
    assert model.config._attn_implementation == "sdpa" and no_hooks_left(model)


def test_an_attention_kernel_that_cannot_be_set_is_one_line_and_the_config_is_unchanged():
    model = tiny_llama()
    chunks, state = run(["diverge model(**inputs) --vs attn_implementation=flash_attention_2",
                         "diverge model(**inputs) --vs attn_implementation=bogus"], model)
    for chunk in chunks[:2]:
        assert chunk.startswith("*** diverge: attn_implementation=") and " refused: " in chunk
        assert "\n" not in chunk
    assert state["after"][2] == "sdpa" and model.config._attn_implementation_internal == "sdpa"
    assert no_hooks_left(model)


def test_rng_grad_mode_and_hooks_unchanged_even_in_training_mode():
    model = tiny_llama(attention_dropout=0.5).train()
    chunks, state = run(["diverge model(**inputs) --vs dtype=float32"], model)
    text = chunks[0]
    assert "note: the model is in training mode with dropout (p up to 0.5): both runs start from the same RNG" in text
    assert first_divergence(text) is None   # same RNG state before each run: the same dropout masks
    before, after = state["before"], state["after"]
    assert torch.equal(before[0], after[0]) and before[1] is after[1] is True
    assert no_hooks_left(model)


def test_bad_settings_and_expressions_are_one_line_errors():
    model = tiny_llama()
    commands = ["diverge model(**inputs) --vs dtype=int7", "diverge model(**inputs) --vs foo=bar",
                "diverge model(**inputs)", "diverge inputs --vs dtype=bf16", "diverge len(inputs) --vs dtype=bf16",
                "diverge model(**inputs) --vs nothere", "diverge model(**inputs) --vs inputs",
                "diverge model(**inputs) --vs dtype=bf16 --rtol x"]
    chunks, _ = run(commands, model)
    assert chunks[:len(commands)] == [
        "*** diverge: unknown dtype 'int7' (one of float32, bfloat16, float16, float64)",
        "*** diverge: unknown setting 'foo' (dtype=X, attn_implementation=X, ckpt=PATH, or an expression giving a "
        "second model)",
        "*** diverge: --vs SETTING is required (usage: diverge EXPR --vs SETTING)",
        "*** diverge: 'inputs' is not a call: EXPR must call a model (diverge model(**inputs) --vs ...)",
        "*** diverge: 'len' is not a model (an nn.Module): EXPR must call a model in the frame",
        "*** diverge: --vs cannot evaluate 'nothere': NameError: name 'nothere' is not defined",
        "*** diverge: --vs inputs: not a model (an nn.Module) and not KEY=VALUE (dtype=X, attn_implementation=X, "
        "ckpt=PATH)",
        "*** diverge: bad value for --rtol: 'x': needs a number >= 0 (usage: diverge EXPR --vs SETTING "
        "[--rtol X] [--atol X] [--max-mem SIZE] [--all] [--break])",
    ]
    assert no_hooks_left(model)


def test_another_module_tree_is_refused_and_an_expression_that_raises_leaves_no_hook():
    model = tiny_llama()
    other = tiny_llama(num_hidden_layers=1)
    chunks, _ = run(["diverge model(**inputs) --vs other",
                     "diverge model(input_ids=inputs['input_ids'] + 1000) --vs dtype=bf16"], model, other)
    assert chunks[0].startswith("*** diverge: other has another module tree: module ")
    assert "error: run 1 raised IndexError: " in chunks[1] and "(nothing compared; hooks removed)" in chunks[1]
    assert no_hooks_left(model, other)


def test_a_small_memory_budget_compares_the_first_calls_and_says_so():
    model = tiny_llama()
    chunks, _ = run(["diverge model(**inputs) --vs dtype=float32 --max-mem 20K"], model)
    text = chunks[0]
    match = re.search(r"memory: the records reached the budget of 20.0 KiB at call #(\d+): only the (\d+) calls "
                      r"recorded before were compared, of (\d+) \(raise --max-mem\)", flat(text))
    assert match is not None
    compared, total = int(match.group(2)), int(match.group(3))
    assert 0 < compared < total == called_modules(model)
    assert f"no divergence: {compared} module calls compared (only the calls recorded: see memory)" in text


class Holder:
    def __init__(self, net):
        self.net = net


def plain_program(holder):
    x = torch.randn(1, 5, 32)
    breakpoint()
    return x


def test_a_block_reached_through_attributes_runs_as_a_bf16_copy_with_its_float_input_cast():
    holder = Holder(plain_model())
    chunks = outputs_of(debug_transcript(plain_program, ["c", "diverge holder.net.blocks[0](x) --vs dtype=bf16",
                                                         "p x.dtype", "c"], holder))
    text = chunks[0]
    assert "second run: a bfloat16 copy of PlainAttention (" in text
    assert [r[1] for r in table(text)][-1] in ("(root)", ".qkv", "qkv", "out")
    assert first_divergence(text) is not None or "no divergence: 3 module calls compared" in text
    assert chunks[1] == "torch.float32"    # the program's x is not cast
    assert {p.dtype for p in holder.net.parameters()} == {torch.float32}
    assert no_hooks_left(holder.net)


def cache_program(model):
    from transformers import DynamicCache

    inputs = inputs_of()
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        model(**inputs, cache=cache)
    ids = torch.tensor([[11]])
    breakpoint()
    return cache.get_seq_length()


def test_a_kv_cache_passed_in_is_copied_for_each_run():
    model = tiny_llama()
    state = {}

    def wrapped():
        state["length"] = cache_program(model)

    chunks = outputs_of(debug_transcript(wrapped, ["c", "diverge model(input_ids=ids, cache=cache) "
                                                        "--vs dtype=float32", "c"]))
    assert "note: cache holds a KV cache: each run got its own copy (the program's is unchanged)" in chunks[0]
    assert "no divergence:" in chunks[0]
    assert state["length"] == 7   # the program's cache holds the 7 prompt tokens, not 7 + 1 + 1
    assert no_hooks_left(model)


def test_a_checkpoint_with_one_weight_changed_names_that_module_and_the_model_keeps_its_weights(tmp_path):
    from safetensors.torch import save_file

    model = tiny_llama()
    weights = {k: v.clone() for k, v in model.state_dict().items() if k != "lm_head.weight"}  # tied to embed
    weights["model.layers.0.mlp.up_proj.weight"][1, 2] += 0.5
    save_file(weights, str(tmp_path / "model.safetensors"))
    torch.save({"model_state_dict": weights, "step": 3}, tmp_path / "ckpt.pt")
    torch.save({"model.norm.weight": torch.ones(3)}, tmp_path / "wrong.pt")
    before = model.model.layers[0].mlp.up_proj.weight.clone()
    chunks, _ = run([f"diverge model(**inputs) --vs ckpt={tmp_path / 'model.safetensors'}",
                     f"diverge model(**inputs) --vs ckpt={tmp_path / 'ckpt.pt'}",
                     f"diverge model(**inputs) --vs ckpt={tmp_path / 'wrong.pt'}",
                     f"diverge model(**inputs) --vs ckpt={tmp_path / 'absent.pt'}"], model)
    for text in chunks[:2]:
        assert first_divergence(text) == ("model.layers.0.mlp.up_proj", "Linear")
        assert "origin: this module — its inputs were identical, its outputs are not" in text
        assert "note: 1 model tensor(s) not in " in text and "keep the model's values (e.g. lm_head.weight)" in text
    assert chunks[2] == (f"*** diverge: {tmp_path / 'wrong.pt'}: 1 tensor(s) of another shape than the model's, "
                         "e.g. model.norm.weight (3,) vs (64,)")
    assert chunks[3] == f"*** diverge: {tmp_path / 'absent.pt'}: no such file or folder"
    assert torch.equal(model.model.layers[0].mlp.up_proj.weight, before)
    assert no_hooks_left(model)


def test_a_change_in_non_module_code_is_traced_to_the_enclosing_module():
    model = tiny_llama()
    other = copy.deepcopy(model)
    other.model.layers[0].self_attn.scaling *= 1.5   # used by the attention function, not by a submodule
    chunks, _ = run(["diverge model(**inputs) --vs other"], model, other)
    text = chunks[0]
    assert first_divergence(text) == ("model.layers.0.self_attn.o_proj", "Linear")
    assert re.search(r"^origin: not this module — its input input\[0\] already differed: max abs [\d.e+-]+, "
                     r"max rel [\d.e+-]+$",
                     text, re.M)
    assert ("  every module output before it matched: the difference arose in the code of\n"
            "  model.layers.0.self_attn (LlamaAttention), outside its submodule calls") in text
    assert [r[1] for r in table(text)][-4:] == ["model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj",
                                                "model.layers.0.self_attn.v_proj", "model.layers.0.self_attn.o_proj"]
    assert no_hooks_left(model, other)


def stepping_program(model, other):
    inputs = inputs_of()
    breakpoint()
    marker = "after the stop"
    return marker


def test_break_stops_at_the_diverging_module_in_a_recursive_debugger_and_the_outer_stop_still_steps():
    model = tiny_llama()
    other = copy.deepcopy(model)
    with torch.no_grad():
        other.model.layers[1].mlp.down_proj.weight[3, 5] += 0.25
    target = other.model.layers[1].mlp.down_proj
    commands = ["c", "diverge model(**inputs) --vs other --break", "p type(self).__name__, tuple(input.shape)",
                "p self is other_target", "c", "n", "p marker", "c"]
    import builtins
    builtins.other_target = target   # reachable from the forward frame's globals lookup (builtins)
    try:
        out = debug_transcript(stepping_program, commands, model, other)
    finally:
        del builtins.other_target
    outer, _, rest = out.partition("ENTERING RECURSIVE DEBUGGER")
    inner = rest.split("((llmpdb)) ")   # the recursive debugger's prompt: its stop, then one chunk a command
    assert first_divergence(outer) == ("model.layers.1.mlp.down_proj", "Linear")
    assert ("diverge --break: model.layers.1.mlp.down_proj (Linear) starts its forward in run 2 (other); `c` "
            "finishes the run (its result is dropped)") in inner[0]
    assert "torch/nn/modules/linear.py(" in inner[0] and ")forward()" in inner[0]
    assert inner[1].strip() == "('Linear', (1, 7, 128))"
    assert inner[2].strip() == "True"
    assert inner[3].startswith("LEAVING RECURSIVE DEBUGGER")
    tail = outputs_of("(llmpdb) (llmpdb) " + inner[3].split("(llmpdb) ", 1)[1])
    assert "return marker" in tail[0]            # `n` at the outer stop still steps one line
    assert tail[1] == "'after the stop'"
    assert no_hooks_left(model, other)


class Wrapper(torch.nn.Module):
    """A DDP-less wrapper (as DataParallel/DDP hold the model): the model as ``.module``."""

    def __init__(self, model):
        super().__init__()
        self.module = model

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)


def test_a_wrapped_model_reports_real_paths_and_break_finds_the_module():
    model = tiny_llama()
    other = copy.deepcopy(model)
    with torch.no_grad():
        other.model.layers[1].mlp.down_proj.weight[3, 5] += 0.25
    wrapped, wrapped_other = Wrapper(model).eval(), Wrapper(other).eval()
    chunks = outputs_of(debug_transcript(stepping_program, ["c", "diverge model(**inputs) --vs other --all", "diverge model(**inputs) --vs other --break",
                     "p type(self).__name__", "c", "c"], wrapped, wrapped_other))
    text = chunks[0]
    assert first_divergence(text) == ("module.model.layers.1.mlp.down_proj", "Linear")
    paths = [r[1] for r in table(text)]
    assert paths and all(p.startswith("module.") and p in dict(wrapped.named_modules()) for p in paths)
    assert "is not a module of the second model" not in chunks[1]
    assert "ENTERING RECURSIVE DEBUGGER" in chunks[1]
    assert ("diverge --break: module.model.layers.1.mlp.down_proj (Linear) starts its forward in run 2"
            in chunks[1]) and "((llmpdb)) 'Linear'" in chunks[1]
    assert no_hooks_left(wrapped, wrapped_other)


def meta_program(model):
    x = torch.randn(1, 5, 32, device="meta")
    breakpoint()
    return x


def test_a_model_on_the_meta_device_gets_no_verdict_rather_than_no_divergence():
    model = plain_model().blocks[0].to("meta")
    chunks = outputs_of(debug_transcript(meta_program, ["c", "diverge model(x) --vs dtype=bf16 --all", "c"], model))
    text = chunks[0]
    assert "no divergence" not in text and first_divergence(text) is None
    assert re.search(r"^no verdict \(\?\): none of the 3 module calls had output values to compare", text, re.M)
    assert {r[-1] for r in table(text)} == {"?*"}
    assert no_hooks_left(model)


class NormDrop(torch.nn.Module):
    """BatchNorm (running stats move in training mode) and a non-persistent float buffer, as rotary inv_freq."""

    def __init__(self):
        super().__init__()
        self.bn = torch.nn.BatchNorm1d(4)
        self.register_buffer("inv_freq", torch.arange(1.0, 5.0), persistent=False)

    def forward(self, x):
        return self.bn(x) * self.inv_freq


def norm_program(model):
    x = torch.randn(8, 4)
    breakpoint()
    return x


def test_buffers_a_training_run_changes_in_place_are_put_back():
    model = NormDrop().train()
    before = {k: v.clone() for k, v in model.named_buffers()}
    chunks = outputs_of(debug_transcript(norm_program, ["c", "diverge model(x) --vs dtype=float64 --all", "c"], model))
    text = chunks[0]
    assert ("note: the runs changed 3 buffers in place (bn.running_mean, bn.running_var, bn.num_batches_tracked): "
            "values put back") in flat(text)
    assert first_divergence(text) is None and "no divergence: 2 module calls compared" in text
    after = dict(model.named_buffers())
    assert all(torch.equal(before[k], after[k]) for k in before) and after["inv_freq"].dtype == torch.float32
    assert no_hooks_left(model)


def two_models_program(model, reference, log):
    inputs = inputs_of()
    breakpoint()
    return log


def test_with_two_models_in_the_frame_the_report_names_the_one_changed_and_says_expr_ran_twice():
    model, reference, log = tiny_llama(), tiny_llama(), []
    chunks = outputs_of(debug_transcript(two_models_program, [
        "c", "diverge reference(**{**inputs, **({} if log.append(1) else {})}) --vs dtype=bf16", "c"],
        model, reference, log))
    text = chunks[0]
    assert ("note: the model changed in run 2 is reference (LlamaForCausalLM), the one EXPR calls; not model"
            in flat(text))
    assert ("note: EXPR is evaluated once per run: its other calls (log.append) ran twice, side effects included"
            in flat(text))
    assert {p.dtype for p in reference.parameters()} == {torch.float32}


def test_every_line_of_the_report_fits_80_columns():
    model = tiny_llama(attention_dropout=0.5).train()
    chunks, _ = run(["diverge model(**inputs) --vs dtype=bfloat16 --max-mem 20K",
                     "diverge model(**inputs) --vs attn_implementation=eager --all"], model, width=80)
    for text in chunks[:2]:
        assert text.startswith("diverge: model(**inputs)  vs  ")
        assert "memory: the records reached" in text or "only in run 2" in text
        too_long = [line for line in text.splitlines() if len(line) > 80]
        assert not too_long, too_long
    assert no_hooks_left(model)


def test_ctrl_c_in_the_second_run_leaves_no_hook_and_restores_rng_grad_mode_and_config():
    model = tiny_llama()
    norm_forward, calls = model.model.norm.forward, []

    def interrupted(*args, **kwargs):   # Ctrl-C while run 2 (eager attention) is inside the final norm
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return norm_forward(*args, **kwargs)

    model.model.norm.forward = interrupted
    chunks, state = run(["diverge model(**inputs) --vs attn_implementation=eager", "p 1 + 1"], model)
    text = chunks[0]
    assert re.search(r"^error: run 2 raised KeyboardInterrupt \(compared up to there; hooks removed\)$", text, re.M)
    assert chunks[1] == "2"   # the debugger goes on
    before, after = state["before"], state["after"]
    assert torch.equal(before[0], after[0]) and after[1] is True and after[2] == "sdpa"
    assert model.config._attn_implementation == "sdpa" and no_hooks_left(model)
