"""docs/tutorial.md quotes real output: re-run its inference tour (docs/capture.sh infer-tour) and check it.

Usage::

    python -m pytest tests/test_docs.py -q

The tour runs ``python -m llmpdb examples/infer.py`` fed through a pipe (about 7 s). A handful of key lines
(the shapes of input_ids and q/k/v, the KV-cache summary, the path lines) must appear both in the tutorial
and, unchanged, in the fresh output; the commands the tutorial shows must be the ones typed, in order.
Line numbers inside installed files (``modeling_llama.py:430``) compare as ``modeling_llama.py:N``, as
``docs/capture.sh --check`` compares them: no step of the tour depends on one, so a transformers release
that moves lines still passes. The whole of both docs is checked by ``docs/capture.sh --check`` (about a
minute, not run here).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CAPTURE = ROOT / "docs" / "capture.sh"
TUTORIAL = ROOT / "docs" / "tutorial.md"

# Lines quoted in docs/tutorial.md that carry the answers of the tour; each must be a whole output line.
KEY_LINES = [
    # stop 1, after the tokenizer: what shape is input_ids?
    "inputs['input_ids']       (1, 7)  i64    56 B  batch · seq",
    "inputs['attention_mask']  (1, 7)  i64    56 B  batch · seq",
    # stop 2, at model(**inputs): which class's forward runs?
    # (wrapped to the 100 columns of the capture: the real path is longer than the line)
    "LlamaForCausalLM.forward",
    "  .../site-packages/transformers/models/llama/modeling_llama.py:430",
    "  (through deprecate_kwarg, can_return_tuple)",
    # at forward: train or inference path, KV cache?
    "path: eval, no_grad, no labels, no cache, attn sdpa | (root) (LlamaForCausalLM)",
    # at the attention kernel, after the q/k/v projections: GQA
    "query                   (1, 4, 7, 16)  f32    1.8 KiB  non-contiguous  batch·heads·seq·head_dim",
    "key                     (1, 2, 7, 16)  f32      896 B                  batch·kv_heads·seq·head_dim",
    "value                   (1, 2, 7, 16)  f32      896 B                  batch·kv_heads·seq·head_dim",
    # after the call: logits and the KV cache
    "outputs.logits                  (1, 7, 384)    f32    10.5 KiB  batch · seq · vocab",
    "outputs.cache: DynamicCache  2 layers  seq 7 (filled)  kv heads 2 / q heads 4 (GQA ×2)  head_dim 16",
    "memory 3.5 KiB = 2 × 2 layers × 2 kv heads × 16 head_dim × 7 seq × 4 B",
    # inside generate(): one new token per step, the cache grows
    "path: eval, no_grad, generate(), no labels, cache DynamicCache len 8, attn sdpa",
    "  | model.layers.0.self_attn (LlamaAttention)",
    "hidden_states           (1, 1, 64)     f32      256 B  batch · seq · hidden",
    "cache: DynamicCache  2 layers  seq 8 (filled)  kv heads 2 / q heads 4 (GQA ×2)  head_dim 16  f32 cpu",
]

_BLOCK = re.compile(r"<!-- capture: ([\w-]+) -->\s*\n```[^\n]*\n(.*?)\n```", re.S)


def _tutorial() -> str:
    return TUTORIAL.read_text(encoding="utf-8")


def _tagged_lines(text: str, name: str) -> list[str]:
    """All lines of the blocks of ``text`` tagged ``<!-- capture: name -->``, in document order."""
    return [line.rstrip() for match in _BLOCK.finditer(text) if match.group(1) == name
            for line in match.group(2).split("\n")]


def _typed(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("(llmpdb) ") and line != "(llmpdb)"]


def _is_subsequence(wanted: list[str], lines: list[str]) -> bool:
    remaining = iter(lines)
    return all(any(line == item for line in remaining) for item in wanted)


def _captured_transformers() -> str:
    match = re.search(r"transformers (\d+)\.\d+\.\d+", _tutorial())
    assert match, "docs/tutorial.md must name the transformers version its output was captured with"
    return match.group(1)


_NUMBERED = re.compile(r"\b([\w.-]+\.py)(\(|:)\d+(\)?)( {2,})?")


def _normalised(line: str) -> str:
    """``modeling_llama.py:430`` -> ``modeling_llama.py:N`` (not the examples' own files), as capture.sh."""
    def number(match: re.Match) -> str:
        if (ROOT / "examples" / match.group(1)).exists():
            return match.group(0)
        return f"{match.group(1)}{match.group(2)}N{match.group(3)}" + ("  " if match.group(4) else "")
    return _NUMBERED.sub(number, line).rstrip()


@pytest.fixture(scope="module")
def infer_tour() -> list[str]:
    if shutil.which("bash") is None:
        pytest.skip("docs/capture.sh needs bash")
    transformers = pytest.importorskip("transformers")
    captured = _captured_transformers()
    installed = transformers.__version__.split(".")[0]
    if installed != captured:
        pytest.skip(f"the tutorial was captured with transformers {captured}.x, this is {transformers.__version__}")
    env = dict(os.environ, PYTHON=sys.executable)
    result = subprocess.run(["bash", str(CAPTURE), "infer-tour"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=90)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.split("\n")
    assert lines[0] == "==> infer-tour <==", result.stdout[:500]
    return [_normalised(line) for line in lines]


def test_key_lines_are_quoted_in_the_tutorial():
    tutorial_lines = _tagged_lines(_tutorial(), "infer-tour")
    missing = [line for line in KEY_LINES if line not in tutorial_lines]
    assert not missing, f"key lines no longer quoted in docs/tutorial.md: {missing}"


@pytest.mark.timeout(120)
def test_key_lines_still_appear_in_the_real_output(infer_tour):
    missing = [line for line in KEY_LINES if _normalised(line) not in infer_tour]
    assert not missing, "docs/tutorial.md is out of date (run docs/capture.sh infer-tour):\n" + "\n".join(missing)


@pytest.mark.timeout(120)
def test_the_tour_ran_to_the_end(infer_tour):
    assert "llmpdb: the program finished" in infer_tour
    assert "done" in infer_tour
    assert not [line for line in infer_tour if line.startswith("***")], "a command of the tour failed"


@pytest.mark.timeout(120)
def test_the_commands_shown_are_the_commands_typed(infer_tour):
    shown = _typed(_tagged_lines(_tutorial(), "infer-tour"))
    typed = _typed(infer_tour)
    assert len(shown) >= 10, shown
    assert _is_subsequence(shown, typed), f"tutorial commands {shown} are not, in order, among {typed}"


def test_block_tags_name_known_transcripts():
    if shutil.which("bash") is None:
        pytest.skip("docs/capture.sh needs bash")
    names = subprocess.run(["bash", str(CAPTURE), "--list"], capture_output=True, text=True, timeout=30,
                           check=True).stdout.split()
    for doc in ("tutorial.md", "commands.md"):
        tags = {match.group(1) for match in _BLOCK.finditer((ROOT / "docs" / doc).read_text(encoding="utf-8"))}
        assert tags, doc
        assert tags <= set(names), f"{doc} quotes unknown transcripts: {sorted(tags - set(names))}"
