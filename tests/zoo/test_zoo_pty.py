"""One real terminal per family of architecture (decoder-only, encoder-decoder, state-space, a model defined
in the script being debugged): `python -m llmpdb tests/zoo/zoo_script.py ARCH`, then `shapes`, `kv`, a module
breakpoint, `stack-model` typed as a user types them; no internal error, every line within 80 columns."""

from __future__ import annotations

import re

import pytest

from tests.e2e.pty_session import PtySession

pytestmark = pytest.mark.timeout(150)

FAMILIES = [
    pytest.param("llama", "LlamaAttention", "model.layers.0.self_attn", id="decoder-llama"),
    pytest.param("bart", "BartAttention", "model.encoder.layers.0.self_attn", id="encoder-decoder-bart"),
    pytest.param("mamba", "MambaMixer", "backbone.layers.0.mixer", id="ssm-mamba"),
    pytest.param("nanogpt", "CausalSelfAttention", "h.0", id="script-defined-nanogpt"),
]


def fits(text: str) -> list[str]:
    return [line for line in text.splitlines() if len(line) > 80 and not re.match(r"^(\[ *\d+\] )?> |^-> ", line)]


@pytest.mark.parametrize("arch, attention, path", FAMILIES)
def test_a_family_in_a_real_terminal(arch, attention, path):
    with PtySession(["-m", "llmpdb", "tests/zoo/zoo_script.py", arch], width=80) as s:
        first = s.wait_prompt()
        assert "`help NAME` explains one" in " ".join(first.split()), first  # the first-stop banner
        s.run("c")
        answers = [first, s.run(f"bm {attention} --once"), s.run("c"), s.run("stack-model")]
        stack = answers[-1]
        s.run("c")
        shapes = s.run("shapes")
        answers += [shapes, s.run("kv")]
        s.finish("c")
        text = "\n".join(answers)
        assert "internal error" not in text and "naming failed" not in text and "Traceback" not in text, text
        assert re.search(rf"^>#\d+\s+{re.escape(path)}\s", stack, re.M), stack
        if arch != "nanogpt":
            assert re.search(r"^out\S*\s+\(2, [34], 96\)\s.*(batch ?· ?seq ?· ?vocab|b·s·voc)$", shapes, re.M), shapes
        WIDE_LINES[arch] = fits(text)


WIDE_LINES: dict[str, list[str]] = {}


@pytest.mark.parametrize("arch", ["llama", "bart", "mamba", "nanogpt"])
def test_a_family_in_a_real_terminal_fits_80_columns(arch):
    if arch not in WIDE_LINES:
        pytest.skip("its terminal session did not run (or failed) in this process")
    assert not WIDE_LINES[arch], "\n".join(WIDE_LINES[arch])
