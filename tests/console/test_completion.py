"""TAB completion without a terminal: ``llmpdb.console.completion`` on a real tiny Llama, its output and inputs."""

from __future__ import annotations

import os

import pytest
import torch

from llmpdb.console.completion import CompletionContext, attribute_names, completions, dict_keys
from llmpdb.console.prompt import continues, history_path
from tiny_models import tiny_llama


@pytest.fixture(scope="module")
def context():
    from transformers import BatchEncoding

    model = tiny_llama()
    ids = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        outputs = model(input_ids=ids)
    names = {"model": model, "outputs": outputs, "ids": ids,
             "inputs": BatchEncoding({"input_ids": ids, "attention_mask": torch.ones_like(ids)}),
             "plain": {"alpha": 1, "beta": 2, 3: "not a string"}}
    commands = {"stack-model": "stack-model [--all]", "shapes": "shapes [EXPR] [--stats]",
                "break-module": "break-module [PATTERN [if CONDITION] [--after N] [--once]]",
                "bm": "break-module [PATTERN [if CONDITION] [--after N] [--once]]", "p": "p expression"}
    return CompletionContext(commands=commands, namespace=names, roots=lambda: [model])


def _texts(line, context):
    return [c.text for c in completions(line, context)]


def test_command_names_whole_with_hyphens_and_their_options(context):
    assert completions("stack-m", context)[0].text == "stack-model"
    assert completions("stack-m", context)[0].start == -len("stack-m")
    assert _texts("shapes --st", context) == ["--stats"]
    assert _texts("bm x --", context) == ["--after", "--once"]
    assert _texts("help stack-", context) == ["stack-model"]  # help's argument is a command name
    assert _texts("h break-m", context) == ["break-module"]
    assert _texts("help stack-model x", context) == []


def test_attributes_of_a_model_output_are_its_keys(context):
    assert _texts("p outputs.lo", context) == ["logits"]  # `loss` is a field left unset: not a key
    assert _texts("outputs.lo", context) == ["logits"]
    assert "shape" in _texts("p outputs.logits.sh", context)
    assert _texts("p model.model.layers[0].self_attn.q_", context) == ["q_proj"]
    assert _texts("!outputs.logi", context) == ["logits"]


def test_dict_keys_of_a_batch_encoding_and_a_dict(context):
    found = completions("p inputs['inp", context)
    assert [(c.text, c.start) for c in found] == [("'input_ids']", -4)]  # replaces the quote too
    assert _texts('inputs["att', context) == ['"attention_mask"]']
    assert _texts("plain[", context) == ["'alpha']", "'beta']"]


def test_module_paths_for_break_module(context):
    assert _texts("bm model.layers.1.se", context) == ["self_attn"]
    assert _texts("break-module model.la", context) == ["layers"]
    assert _texts("bm ", context) == ["lm_head", "model"]
    assert "ids" in _texts("bm model.layers.1 if id", context)  # after `if`: the condition's names


def test_names_of_the_frame(context):
    assert _texts("p mod", context) == ["model"]
    assert "inputs" in _texts("inp", context)


def test_file_paths_for_statediff(tmp_path, context, monkeypatch):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "model.safetensors").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    assert _texts("statediff model ck", context)[-1] == "ckpt/"
    assert _texts("statediff model ckpt/mo", context) == ["model.safetensors"]
    assert _texts(f"statediff model {tmp_path}/ck", context) == ["ckpt/"]


class _Guest:
    """A user object whose every lookup hook raises: completion must never run them."""

    calls = 0

    def __getattr__(self, name):
        type(self).calls += 1
        raise RuntimeError("__getattr__ ran")

    def __dir__(self):
        type(self).calls += 1
        raise RuntimeError("__dir__ ran")

    @property
    def costly(self):
        type(self).calls += 1
        raise RuntimeError("property ran")

    def keys(self):
        type(self).calls += 1
        raise RuntimeError("keys ran")


def test_user_code_never_runs():
    guest = _Guest()
    guest.stored = 1
    context = CompletionContext(namespace={"guest": guest})
    assert _texts("guest.st", context) == ["stored"]
    assert "costly" in attribute_names(guest)
    assert _texts("guest.costly.", context) == []  # a property's value is unknown without running it
    assert _texts("guest.missing.", context) == []
    assert _texts("guest['", context) == [] and dict_keys(guest) == []
    assert _Guest.calls == 0


def test_continuation_lines_and_history_path(monkeypatch, tmp_path):
    if continues("x"):  # 3.13+: pdb reads its own continuation lines
        pytest.skip("continuation lines are pdb's own on this Python")
    assert continues("for i in range(3):") and continues("!with open(p) as f:")
    assert not continues("b work.py:") and not continues("p d[1:")
    assert continues("for i in range(3):\n    print(i)") and not continues("for i in x:\n    print(i)\n")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert history_path() == tmp_path / "llmpdb" / "history"
    monkeypatch.delenv("XDG_STATE_HOME")
    assert history_path() == type(tmp_path)(os.path.expanduser("~/.local/state/llmpdb/history"))
