"""`watch` / `unwatch` under a real llmpdb debugger: a mask watched from the script into a tiny Llama's
attention forward, expressions that raise, and no change to the program's state."""

from __future__ import annotations

import torch
from tiny_models import tiny_llama
from transcript import debug_transcript, outputs_of

from llmpdb.inspect.watch_records import Sample, Watch, observe


class Raiser:
    """Reading an attribute raises (a property: a read, which a watch may do; a call it may not)."""

    @property
    def exit(self):
        raise SystemExit(4)

    @property
    def interrupt(self):
        raise KeyboardInterrupt


RAISER = Raiser()


def run_model(model):
    inputs = {"input_ids": torch.arange(3, 10).unsqueeze(0), "attention_mask": torch.ones(1, 7, dtype=torch.long)}
    attention_mask = inputs["attention_mask"]
    pair = (attention_mask, attention_mask.float())
    breakpoint()
    out = model(**inputs)
    breakpoint()
    return out, attention_mask


AFTER_FIRST = f"run_model:{run_model.__code__.co_firstlineno + 5}"   # the lines after its two breakpoint()s
AFTER_SECOND = f"run_model:{run_model.__code__.co_firstlineno + 7}"


def test_watch_attention_mask_from_the_script_into_the_attention_forward():
    model = tiny_llama(attn_implementation="eager")
    commands = ["c", "watch attention_mask", "bm layers.0.self_attn --once", "c", "watch", "c", "watch", "c"]
    chunks = outputs_of(debug_transcript(run_model, commands, model, width=100))
    assert chunks[0] == "watch 1: attention_mask = (1, 7) i64 (recorded at every stop; `watch` shows the history)"
    assert "watch 1 attention_mask: (1, 7) i64 → (1, 1, 7, 7) f32  (shape, dtype)" in chunks[2].splitlines()
    history = chunks[3].splitlines()
    assert history[0] == "watch 1: attention_mask  (1 change)"
    assert history[1].split() == ["stop", "at", "value", "changed"]
    assert history[2].split() == ["2", AFTER_FIRST, "(1,", "7)", "i64"]
    assert history[3].split() == ["3", "LlamaAttention.forward:241", "(1,", "1,", "7,", "7)", "f32", "←", "shape,", "dtype"]
    assert "watch 1 attention_mask: (1, 1, 7, 7) f32 → (1, 7) i64  (shape, dtype)" in chunks[4].splitlines()
    assert chunks[5].splitlines()[0] == "watch 1: attention_mask  (2 changes)"


def test_watch_nested_tensors_unchanged_across_stops_is_one_run():
    model = tiny_llama()
    chunks = outputs_of(debug_transcript(run_model, ["c", "watch pair", "c", "watch", "c"], model, width=100))
    assert chunks[0].startswith("watch 1: pair = ((1, 7) i64, (1, 7) f32) (recorded")
    assert "watch 1" not in chunks[1]  # no change: the stop says nothing
    assert chunks[2].splitlines()[0] == "watch 1: pair  (0 changes)"
    assert chunks[2].splitlines()[2].split()[:4] == ["2-3", AFTER_FIRST, "…", AFTER_SECOND]


def test_watch_survives_what_the_expression_raises_and_changes_no_state():
    model = tiny_llama()
    commands = ["c", "watch (z := 5)", "p 'z' in locals()", "watch RAISER.exit", "watch RAISER.interrupt",
                "watch no_such_name", "watch 1 +", "watch no_such_name", "c", "watch", "unwatch 2", "unwatch nope",
                "unwatch all", "watch", "c"]
    chunks = outputs_of(debug_transcript(run_model, commands, model, width=120))
    assert chunks[0].startswith("watch 1: (z := 5) = 5")
    assert chunks[1] == "False"
    assert chunks[2].startswith("watch 2: RAISER.exit = SystemExit: 4 (recorded at every stop")
    assert chunks[3].startswith("watch 3: RAISER.interrupt = KeyboardInterrupt (recorded")
    assert chunks[4].startswith("watch 4: no_such_name = NameError: name 'no_such_name' is not defined")
    assert chunks[5].startswith("*** watch: invalid expression '1 +'")
    assert chunks[6] == "*** watch: no_such_name is already watched (watch alone shows its history)"
    assert "-> return out, attention_mask" in chunks[7]  # the stop happened despite every watch raising
    assert "SystemExit: 4" in chunks[8] and "KeyboardInterrupt" in chunks[8]
    assert chunks[9] == "unwatch: removed watch 2 (RAISER.exit)"
    assert chunks[10].startswith("*** unwatch: no watch 'nope' (watched: 1: (z := 5), 3: ")
    assert chunks[11] == "unwatch: removed 3 watches"
    assert chunks[12] == "watch: nothing watched (watch EXPR to start)"


def test_watch_records_pure():
    watch = Watch(1, "m")
    assert watch.record(Sample("(1, 7) i64", (("shape", "(1, 7)"),)), stop=1) is None
    assert watch.record(Sample("(1, 7) i64", (("shape", "(1, 7)"),)), stop=2) is None
    previous = watch.record(Sample("(7,) i64", (("shape", "(7,)"),)), stop=3)
    assert previous is not None and (previous.first, previous.last) == (1, 2)
    assert observe(torch.zeros(2, 3, dtype=torch.bfloat16)).text == "(2, 3) bf16"
    assert observe(torch.zeros(2, 3).to_sparse()).text == "(2, 3) f32 sparse_coo"
    assert observe({"a": torch.zeros(1), "n": 3}).text == "{a: (1,) f32, n: 3}"


def keeps_a_list(model):
    pending = [10, 20, 30]
    hidden = torch.zeros(2, 3, 4)
    breakpoint()
    breakpoint()
    return pending


def test_watch_refuses_calls_that_could_change_the_program():
    """`watch pending.pop()` ran the pop at every stop: the program lost an item per stop."""
    commands = ["c", "watch pending.pop()", "watch pending.append(1)", "watch sorted(pending)", "watch len(pending)",
                "watch hidden.view(-1).float()", "watch hidden.sum(dim=0).shape", "watch pending[0].size()",
                "c", "p pending", "c"]
    out = debug_transcript(keeps_a_list, commands, None, width=200)
    assert out.count("(llmpdb) ") == len(commands)  # every command ran, to the last c
    chunks = outputs_of(out)
    assert chunks[0].startswith("*** watch: refused 'pending.pop()': pending.pop(...) is a call: a watch runs "
                                "at every stop")
    assert chunks[1].startswith("*** watch: refused 'pending.append(1)'")
    assert chunks[2].startswith("*** watch: refused 'sorted(pending)': sorted(...) is a call")
    assert chunks[3].startswith("watch 1: len(pending) = 3 ")
    assert chunks[4].startswith("watch 2: hidden.view(-1).float() = (24,) f32 ")
    assert chunks[5].startswith("watch 3: hidden.sum(dim=0).shape = ")
    assert chunks[6].startswith("watch 4: pending[0].size() = TypeError: size() is run by a watch only on a "
                                "tensor, not on a int")
    assert chunks[8] == "[10, 20, 30]"


def test_a_stop_where_the_name_is_out_of_scope_is_no_change():
    """A stop in another frame (the MLP's forward has no ``attention_mask``) is not a change to NameError and
    back: the watch keeps its value, and says nothing at those stops."""
    model = tiny_llama()
    commands = ["c", "watch attention_mask", "bm layers.0.mlp --once", "c", "c", "watch", "c"]
    chunks = outputs_of(debug_transcript(run_model, commands, model, width=100))
    assert "(LlamaMLP)" in chunks[2]
    assert "NameError" not in chunks[2] and "watch 1" not in chunks[2], chunks[2]
    assert "watch 1" not in chunks[3], chunks[3]  # back in run_model: the same (1, 7) i64
    assert chunks[4].splitlines()[0] == "watch 1: attention_mask  (0 changes)", chunks[4]
