"""llmpdb.inspect.checkpoint_guard: hostile checkpoints, all built here under tmp_path, refused in one line."""

from __future__ import annotations

import io
import json
import os
import pickle
import re
import struct
import subprocess
import sys
import textwrap
import zipfile

import pytest
import torch
from safetensors.torch import save_file

from llmpdb.inspect.checkpoint import CheckpointError, TensorMeta, read_checkpoint
from llmpdb.inspect.safetensors_header import library_reader

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class RunsShell:
    def __reduce__(self):
        return (os.system, ("touch pwned-by-pickle",))


def _refusal(path, **kwargs) -> str:
    with pytest.raises(CheckpointError) as err:
        read_checkpoint(path, **kwargs)
    message = str(err.value)
    assert "\n" not in message
    return message


def _zip_bomb(path, inflated: int) -> None:
    """A torch-looking zip whose data.pkl deflates from zeros: `inflated` bytes from a few KB."""
    chunk = bytes(2**20)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        with zf.open("archive/data.pkl", "w", force_zip64=True) as member:
            for _ in range(inflated // len(chunk)):
                member.write(chunk)
        zf.writestr("archive/version", "3\n")


def test_zip_bomb_is_refused_from_the_central_directory(tmp_path):
    bomb = tmp_path / "bomb.pt"
    _zip_bomb(bomb, 256 * 2**20)
    assert os.path.getsize(bomb) < 2 * 2**20
    message = _refusal(bomb)
    assert message.startswith("bomb.pt: refused: archive/data.pkl inflates to 256.0 MiB from ")
    assert message.endswith("×): a zip bomb; torch.save never compresses")
    assert _refusal(bomb, unsafe_trusted=True) == message  # trusting the code does not trust the size


def test_reading_a_zip_bomb_adds_little_memory(tmp_path):
    bomb = tmp_path / "bomb.pt"
    _zip_bomb(bomb, 512 * 2**20)
    child = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {ROOT!r})
        import torch
        from llmpdb.inspect.checkpoint import CheckpointError, read_checkpoint
        def status(key):
            with open("/proc/self/status") as fh:
                return next(int(l.split()[1]) for l in fh if l.startswith(key)) // 1024
        open("/proc/self/clear_refs", "w").write("5")
        before = status("VmRSS:")
        try:
            read_checkpoint({str(bomb)!r})
        except CheckpointError as exc:
            print(exc)
        print(status("VmHWM:") - before)
    """)
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
    message, added = out.stdout.strip().splitlines()
    assert "a zip bomb" in message
    assert int(added) < 64, f"reading the bomb added {added} MB"


def test_fifo_and_device_files_are_refused_without_opening_them(tmp_path):
    os.mkfifo(tmp_path / "pipe.pt")
    os.mkfifo(tmp_path / "pipe.safetensors")
    shards = tmp_path / "sharded"
    shards.mkdir()
    os.mkfifo(shards / "model-00001-of-00001.safetensors")
    (shards / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"w": "model-00001-of-00001.safetensors"}}))
    index_fifo = tmp_path / "index_is_a_pipe"
    index_fifo.mkdir()
    os.mkfifo(index_fifo / "model.safetensors.index.json")
    os.symlink("/dev/null", tmp_path / "null.bin")
    child = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {ROOT!r})
        from llmpdb.inspect.checkpoint import CheckpointError, read_checkpoint
        for path in sys.argv[1:]:
            try:
                read_checkpoint(path)
                print("read", path)
            except CheckpointError as exc:
                print(exc)
    """)
    paths = [tmp_path / "pipe.pt", tmp_path / "pipe.safetensors", shards, index_fifo, tmp_path / "null.bin"]
    try:  # on a reader that opens the pipe, the child blocks: the timeout kills it and the test fails
        out = subprocess.run([sys.executable, "-c", child, *map(str, paths)], capture_output=True, text=True,
                             timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("reading a FIFO checkpoint blocked")
    fifo = "refused: a FIFO (named pipe), not a regular file (reading it could block forever)"
    assert out.stdout.splitlines() == [
        f"pipe.pt: {fifo}",
        f"pipe.safetensors: {fifo}",
        f"model-00001-of-00001.safetensors: {fifo}",
        f"model.safetensors.index.json: {fifo}",
        "null.bin: refused: a character device, not a regular file (reading it could block forever)",
    ], out.stderr[-2000:]


def _safetensors(path, header, data: bytes = b"") -> str:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)) + raw + data)
    return str(path)


@pytest.mark.parametrize("header, data, expected", [
    ({"w": {"dtype": "F32", "shape": [-1, -4], "data_offsets": [0, 16]}}, bytes(16),
     "'w': shape [-1, -4] is not a list of non-negative integers"),
    ({"w": {"dtype": "F32", "shape": [4], "data_offsets": [-16, 0]}}, bytes(16),
     "'w': data_offsets [-16, 0] is not two non-negative integers"),
    ({"w": {"dtype": "F32", "shape": [2**40, 2**40], "data_offsets": [0, 16]}}, bytes(16),
     "'w' spans bytes 0..16 but shape (1099511627776, 1099511627776) of float32 needs 4835703278458516698824704"),
    ({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}}, bytes(16),
     "'w' spans bytes 0..8 but shape (4,) of float32 needs 16"),
    ({"w": {"dtype": "Q4_K", "shape": [4], "data_offsets": [0, 16]}}, bytes(16),
     "'w': unknown dtype 'Q4_K' (known: BOOL, U8, I8, U16, I16, U32, I32, U64, I64, F16, BF16, F32, F64, C64, "
     "F8_E4M3, F8_E4M3FNUZ, F8_E5M2, F8_E5M2FNUZ, F8_E8M0)"),
    ({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
      "v": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}}, bytes(16),
     "refused: 'w' and 'v' share bytes 8..16"),
    (b'{"w": {"dtype": "F32", "shape": [1e400], "data_offsets": [0, 4]}}', bytes(4),
     "'w': shape [1e400] is not a list of non-negative integers"),
    (b'{"w": {"dtype": "F32", "shape": [' + b"9" * 5000 + b'], "data_offsets": [0, 4]}}', bytes(4),
     "refused: safetensors header holds a 5000-digit number (a checkpoint's numbers have at most 19)"),
    (b"[" * 100_000 + b"]" * 100_000, b"",
     "refused: safetensors header is nested too deeply"),
    (b'{"w": {"dtype": "F32", "shape": [NaN], "data_offsets": [0, 4]}}', bytes(4),
     "refused: safetensors header holds NaN, which is not JSON"),
    (b'{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
     b'"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}', bytes(8),
     "refused: duplicate key 'w' in the safetensors header"),
    (b'{"w": {"dtype": "F32", "dtype": "F16", "shape": [1], "data_offsets": [0, 4]}}', bytes(4),
     "refused: duplicate key 'dtype' in the safetensors header"),
], ids=["negative-shape", "negative-offset", "huge-shape", "short-span", "unknown-dtype", "overlap", "1e400",
        "5000-digits", "100k-deep", "nan", "duplicate-tensor", "duplicate-field"])
def test_safetensors_header_fields_are_validated(tmp_path, header, data, expected):
    path = _safetensors(tmp_path / "bad.safetensors", header, data)
    # llmpdb's reason, and the safetensors library's verdict (it keeps a duplicate tensor: llmpdb decides)
    too = "" if expected.startswith("refused: duplicate key 'w'") else f" ({library_reader()[1]} refuses it too)"
    assert _refusal(path) == f"bad.safetensors: {expected}{too}"


def test_a_valid_header_with_an_empty_tensor_still_reads(tmp_path):
    path = str(tmp_path / "ok.safetensors")
    save_file({"a": torch.zeros(0, 3), "b": torch.ones(2, dtype=torch.bfloat16)}, path)
    assert read_checkpoint(path).tensors == {"a": TensorMeta((0, 3), "float32"), "b": TensorMeta((2,), "bfloat16")}


def _index(folder, shard: str) -> None:
    folder.mkdir(exist_ok=True)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": shard}}))


def test_shards_outside_the_checkpoint_folder_are_refused(tmp_path):
    outside = tmp_path / "secret.safetensors"
    save_file({"w": torch.zeros(2)}, str(outside))
    _index(tmp_path / "climb", "../../../etc/passwd")
    assert _refusal(tmp_path / "climb") == (
        "model.safetensors.index.json: refused: shard '../../../etc/passwd' is outside the checkpoint's folder")
    _index(tmp_path / "absolute", "/etc/passwd")
    assert _refusal(tmp_path / "absolute" / "model.safetensors.index.json") == (
        "model.safetensors.index.json: refused: shard '/etc/passwd' is an absolute path, outside the checkpoint's "
        "folder")
    _index(tmp_path / "link", "model.safetensors")
    os.symlink(outside, tmp_path / "link" / "model.safetensors")
    assert _refusal(tmp_path / "link") == (
        f"model.safetensors.index.json: refused: shard 'model.safetensors' links to {os.path.realpath(outside)}, "
        "outside the checkpoint's folder (name that file itself to read it)")
    (tmp_path / "plain").mkdir()  # a folder without an index: its files are held to the same rule
    os.symlink(outside, tmp_path / "plain" / "model.safetensors")
    assert _refusal(tmp_path / "plain").startswith("plain: refused: shard 'model.safetensors' links to ")
    assert read_checkpoint(tmp_path / "plain" / "model.safetensors").tensors == {"w": TensorMeta((2,), "float32")}


def test_a_hugging_face_cache_snapshot_links_into_its_blobs(tmp_path):
    repo = tmp_path / "hub" / "models--org--tiny"
    (repo / "blobs").mkdir(parents=True)
    save_file({"w": torch.zeros(2)}, str(repo / "blobs" / "abc123"))
    snapshot = repo / "snapshots" / "rev1"
    _index(snapshot.parent, "unused")
    snapshot.mkdir()
    _index(snapshot, "model.safetensors")
    os.symlink("../../blobs/abc123", snapshot / "model.safetensors")
    assert read_checkpoint(snapshot).tensors == {"w": TensorMeta((2,), "float32")}


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_imports_are_found_without_unpickling(protocol):
    from llmpdb.inspect.checkpoint_guard import pickle_imports

    data = pickle.dumps({"w": 1, "x": [RunsShell(), "posix"]}, protocol=protocol)
    assert pickle_imports(io.BytesIO(data)) == [f"{os.system.__module__}.system"]


def test_a_pickle_with_code_names_the_callable_and_runs_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    torch.save({"w": torch.zeros(2), "payload": RunsShell()}, tmp_path / "evil.pt")
    with open(tmp_path / "evil.bin", "wb") as fh:  # a plain pickle, protocol 4: STACK_GLOBAL
        pickle.dump({"w": 1.0, "payload": RunsShell()}, fh, protocol=4)
    refused = "refused: this pickle would run code (os.system); `--unsafe-trusted` loads it"
    assert _refusal(tmp_path / "evil.pt") == f"evil.pt: {refused}"
    assert _refusal(tmp_path / "evil.bin") == f"evil.bin: {refused}"
    assert not (tmp_path / "pwned-by-pickle").exists()


def test_a_stored_pickle_over_the_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    import llmpdb.inspect.checkpoint_guard as guard

    monkeypatch.setattr(guard, "MAX_PICKLE_BYTES", 1024)
    path = tmp_path / "big.pt"
    torch.save({f"w{i}": torch.zeros(1) for i in range(100)}, path)
    assert re.fullmatch(r"big.pt: refused: big/data.pkl is \d+\.\d KiB; a state dict's pickle holds no tensor data "
                        r"\(limit 1.0 KiB\)", _refusal(path))
    legacy = tmp_path / "big.bin"
    torch.save({f"w{i}": torch.zeros(1) for i in range(100)}, legacy, _use_new_zipfile_serialization=False)
    assert _refusal(legacy) == ("big.bin: refused: its pickle runs past 1.0 KiB; a state dict's pickle holds no "
                                "tensor data")


def test_empty_and_proc_files_are_refused_before_torch_reads_them(tmp_path):
    (tmp_path / "empty.pt").write_bytes(b"")
    assert _refusal(tmp_path / "empty.pt") == "empty.pt: refused: an empty file (0 bytes), not a torch.save file"
    assert _refusal("/proc/self/environ") == "environ: refused: an empty file (0 bytes), not a torch.save file"


@pytest.mark.parametrize("text, expected", [
    ("[" * 100_000 + "]" * 100_000, "refused: index is nested too deeply"),
    ('{"weight_map": {"w": "a"}, "n": ' + "9" * 5000 + "}",
     "refused: index holds a 5000-digit number (a checkpoint's numbers have at most 19)"),
    (json.dumps({"weight_map": {"w": "a\x00b.safetensors"}}),
     "refused: shard 'a\\x00b.safetensors' holds a NUL byte, which no file name can"),
    (json.dumps({"weight_map": {"w": "a" * 5000 + ".safetensors"}}),
     "1 shard(s) listed but absent: " + "a" * 28 + "…" + "a" * 16 + ".safetensors"),
    ('{"weight_map": {"w": "a.safetensors", "w": "b.safetensors"}}',
     "refused: duplicate key 'w' in the index"),
], ids=["100k-deep", "5000-digits", "nul-byte", "5000-char-name", "duplicate-key"])
def test_a_hostile_index_is_one_line(tmp_path, text, expected):
    (tmp_path / "model.safetensors.index.json").write_text(text)
    assert _refusal(tmp_path) == f"model.safetensors.index.json: {expected}"


def test_python2_names_are_mapped_as_unpicklers_do(tmp_path):
    from llmpdb.inspect.checkpoint_guard import pickle_imports

    assert pickle_imports(io.BytesIO(pickle.dumps({1, 2}, protocol=2))) == ["builtins.set"]
    torch.save({"w": torch.zeros(2), "ids": {1, 2}}, tmp_path / "sets.pt")  # weights_only allows a set
    assert set(read_checkpoint(tmp_path / "sets.pt").tensors) == {"w"}


@pytest.mark.parametrize("save, kind", [
    (lambda path: torch.save({"w": torch.ones(2)}, path), "a zip archive (a torch.save checkpoint)"),
    (lambda path: torch.save({"w": torch.ones(2)}, path, _use_new_zipfile_serialization=False),
     "a pickle (a legacy torch.save checkpoint)"),
    (lambda path: open(path, "wb").write(b"GGUF" + bytes(60)), "a GGUF file"),
], ids=["zip", "legacy", "gguf"])
def test_a_file_of_another_format_is_named_as_such_by_the_safetensors_reader(tmp_path, save, kind):
    from llmpdb.files.safetensors_file import read_safetensors

    path = tmp_path / "weights.safetensors"
    save(str(path))
    with pytest.raises(CheckpointError) as caught:
        read_safetensors(str(path))
    assert str(caught.value) == f"weights.safetensors: not a safetensors file: its first bytes are those of {kind}"
