"""llmpdb.inspect.pickle_globals: torch's public scan names the globals a real ``torch.save`` file imports;
nothing of them is imported or run."""

from __future__ import annotations

import io
import sys

import pytest
import torch

pytestmark = pytest.mark.filterwarnings("ignore:Detected pickle protocol 4")

from llmpdb.inspect.checkpoint import CheckpointError, TensorMeta, read_checkpoint
from llmpdb.inspect.pickle_globals import pickle_imports, public_unsafe, unsafe_globals

RESTORED: list[str] = []
PAYLOAD = '''
import os
if os.environ.get("LLMPDB_EVIL_MARK"):
    open(os.environ["LLMPDB_EVIL_MARK"], "w").write("imported")

class Payload:
    def __setstate__(self, state):
        open(os.environ["LLMPDB_EVIL_MARK"], "w").write("restored")
'''


class Config:
    """A plain class of this module, as a training script pickles its config next to the weights."""

    def __init__(self, lr: float):
        self.lr = lr

    def __setstate__(self, state):
        RESTORED.append("Config")
        self.__dict__.update(state)


@pytest.fixture(autouse=True)
def _nothing_restored_yet():
    RESTORED.clear()


def _refusal(path) -> str:
    with pytest.raises(CheckpointError) as err:
        read_checkpoint(path)
    return str(err.value)


def test_a_class_of_the_test_module_is_named_by_torchs_public_scan_and_never_restored(tmp_path):
    path = tmp_path / "run.pt"
    torch.save({"w": torch.zeros(2), "config": Config(0.1)}, path)
    name = f"{__name__}.Config"
    with open(path, "rb") as fh:
        assert public_unsafe(fh) == {name} == set(torch.serialization.get_unsafe_globals_in_checkpoint(str(path)))
    assert _refusal(path) == f"run.pt: refused: this pickle would run code ({name}); `--unsafe-trusted` loads it"
    assert RESTORED == []
    with torch.serialization.safe_globals([Config]):  # the user allowed it: torch's scan says so, llmpdb agrees
        assert read_checkpoint(path).tensors == {"w": TensorMeta((2,), "float32")}
    assert RESTORED == ["Config"]  # torch's weights_only load restored it, as the user allowed


def test_a_class_in_a_module_not_loaded_is_named_and_its_module_never_imported(tmp_path, monkeypatch):
    (tmp_path / "llmpdb_payload_mod.py").write_text(PAYLOAD)
    monkeypatch.syspath_prepend(str(tmp_path))
    import llmpdb_payload_mod

    path = tmp_path / "evil.pt"
    torch.save({"w": torch.zeros(3), "x": llmpdb_payload_mod.Payload()}, path)
    del sys.modules["llmpdb_payload_mod"]  # importable from sys.path, and not loaded: a load would import it
    marker = tmp_path / "mark"
    monkeypatch.setenv("LLMPDB_EVIL_MARK", str(marker))
    assert _refusal(path) == ("evil.pt: refused: this pickle would run code (llmpdb_payload_mod.Payload); "
                              "`--unsafe-trusted` loads it")
    assert "llmpdb_payload_mod" not in sys.modules and not marker.exists()


def test_pickles_the_public_scan_cannot_read_are_judged_by_the_allow_list(tmp_path):
    path = tmp_path / "p4.pt"  # protocol 4: STACK_GLOBAL, an opcode torch's scan does not know
    torch.save({"w": torch.zeros(2)}, path, pickle_protocol=4)
    with open(path, "rb") as fh:
        assert public_unsafe(fh) is None
    assert "would run code" not in _refusal(path)  # nothing outside the list (torch's weights_only load fails)
    torch.save({"w": torch.zeros(2), "config": Config(0.1)}, path, pickle_protocol=4)
    assert f"({__name__}.Config)" in _refusal(path) and RESTORED == []


def test_the_public_verdict_keeps_the_pickles_order_and_adds_what_the_walk_missed():
    found = ["torch._utils._rebuild_tensor_v2", "posix.system", "builtins.eval", "posix.system"]
    assert unsafe_globals(found, {"builtins.eval", "posix.system", "zz.hidden"}) == [
        "posix.system", "builtins.eval", "zz.hidden"]
    assert unsafe_globals(found, set()) == []
    assert pickle_imports(io.BytesIO(b"cposix\nsystem\n.")) == ["posix.system"]
