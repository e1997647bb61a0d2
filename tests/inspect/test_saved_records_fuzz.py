"""Fuzz what ``python -m llmpdb open`` reads from a file's ``__metadata__`` with ``hypothesis``: the snapshot
records (``inspect.saved_records.records_from_json``), the whole llmpdb document (``cli.open_file.load_saved``)
and the saved paths (``inspect.tensor_paths.nest_paths``, aliases included). Properties: only the documented
refusal comes out (``ValueError`` from the records, ``CheckpointError`` from ``load_saved``; ``nest_paths``
never raises), no code from the document runs (payloads that would create a marker file never do), and
every example is small and quick."""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile

import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from llmpdb.cli.open_file import _namespace, load_saved
from llmpdb.files.safetensors_file import CheckpointError, write_safetensors
from llmpdb.inspect.saved_records import RECORDS, records_from_json
from llmpdb.inspect.tensor_paths import nest_paths

FUZZ = settings(max_examples=70, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MARKER = os.path.join(tempfile.gettempdir(), f"llmpdb-fuzz-ran-{os.getpid()}")
PAYLOADS = [f"\nimport os; os.system('touch {MARKER}')\n", f"__import__('os').system('touch {MARKER}')",
            "x.__class__", "{{0.__class__}}", "\x1b[31m", "a]['b", "__builtins__"]
TEXT = st.one_of(st.text(max_size=8), st.sampled_from(PAYLOADS))
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(), TEXT)
JSONISH = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
                       max_leaves=10)


def _field_names(name: str) -> list[str]:
    return [f.name for f in dataclasses.fields(RECORDS[name])]


RECORD = st.sampled_from(sorted(RECORDS)).flatmap(lambda name: st.fixed_dictionaries({
    "record": st.just(name),
    "fields": st.dictionaries(st.sampled_from(_field_names(name) + ["zzz"]), JSONISH, max_size=6)}))
DOCUMENT = st.recursive(RECORD | JSONISH, lambda inner: st.lists(inner, max_size=3) |
                        st.fixed_dictionaries({"dict": st.lists(st.lists(inner, min_size=2, max_size=2) | inner,
                                                                max_size=3)}), max_leaves=8)


@FUZZ
@given(DOCUMENT)
@example({"dict": [[[1], 2]]})  # a list key: a tuple, hashable
@example({"dict": [[{"dict": []}, 2]]})  # a dict key: refused
@example({"dict": 5})
@example({"dict": [[1, 2, 3]]})
@example(json.loads("[" * 70 + "1" + "]" * 70))  # past MAX_DEPTH
@example({"record": "TensorMeta", "fields": {"shape": "abc", "nbytes": 1e400}})
def test_records_rebuild_or_raise_value_error(doc):
    try:
        records_from_json(doc)
    except ValueError as exc:
        assert "\n" not in str(exc)[:200]


def test_records_nested_past_the_recursion_limit_raise_value_error():
    doc: object = 1
    for _ in range(5000):
        doc = [doc]
    try:
        records_from_json(doc)
    except ValueError as exc:
        assert "nested" in str(exc)
    else:
        raise AssertionError("5000 levels were rebuilt")


def _saved_file(doc: object, paths: list[str]) -> str:
    fd, path = tempfile.mkstemp(suffix=".safetensors")
    os.close(fd)
    tensors = [(p, torch.ones(1)) for p in dict.fromkeys(paths) if p != "__metadata__"]
    write_safetensors(path, tensors, {"llmpdb": json.dumps(doc)})
    return path


SNAPSHOT = st.fixed_dictionaries(
    {"format": st.sampled_from(["llmpdb-snapshot-1", "llmpdb-snapshot-x", "other"])},
    optional={"kind": JSONISH, "location": JSONISH, "header": JSONISH, "stack": DOCUMENT, "current": SCALARS,
              "root_names": DOCUMENT, "kv": st.fixed_dictionaries({}, optional={"report": DOCUMENT, "path": TEXT}),
              "aliases": st.dictionaries(TEXT, TEXT, max_size=4), "expr": JSONISH})
PATHS = st.lists(st.text(st.sampled_from("ab_.[]0'\"_"), min_size=1, max_size=10) | st.sampled_from(PAYLOADS),
                 max_size=5)


@FUZZ
@given(SNAPSHOT, PATHS)
@example({"format": "llmpdb-snapshot-1", "current": 1e400}, ["t"])  # int(inf): OverflowError before
@example({"format": "llmpdb-snapshot-1", "aliases": {"z.__class__": "z.w", "z.items": "z.w"}}, ["z.w"])
@example({"format": "llmpdb-snapshot-1", "stack": {"dict": [[{"dict": []}, 1]]}}, ["t"])
@example({"format": "llmpdb-snapshot-1", "aliases": {"q[[1]]": "t", "r[{1: 2}]": "t", "s[(((": "t"}}, ["t"])
def test_a_saved_document_loads_or_is_refused_in_one_line_and_runs_nothing(doc, paths):
    path = _saved_file(doc, paths)
    try:
        try:
            saved = load_saved(path)
        except CheckpointError as exc:
            assert "\n" not in str(exc)
            return
        refused: list[str] = []
        namespace, names = _namespace(saved, refused)
        assert set(names) <= set(namespace) and not any(n.startswith("__") for n in names)
        assert not os.path.exists(MARKER)
    finally:
        os.unlink(path)


@FUZZ
@given(st.lists(st.text(st.sampled_from("ab_.[]0'\"_(),{}:-\\ \n"), max_size=24) | st.sampled_from(PAYLOADS),
                max_size=8))
@example(["z.__class__", "z.w"])
@example(["x[[1]]", "x[{}]", "x[1]", "x[True]", "x.items", "x.a"])
@example(["a" + ".b" * 5000])  # a path of 5000 parts: refused, not quadratic
@example(["x[" + "(" * 3000 + "]"])  # literal_eval too deep
def test_nest_paths_never_raises(paths):
    refused: list[str] = []
    tree = nest_paths({p: torch.zeros(1) for p in paths}, refused=refused)
    assert isinstance(tree, dict) and set(refused) <= set(paths)
    assert not os.path.exists(MARKER)
