"""The config file under a real debugger (tests/transcript.py): width, colour, `shapes` defaults, warnings."""

from __future__ import annotations

import re

import pytest
import torch

from llmpdb.render.style import Style, strip_ansi
from transcript import debug_transcript, outputs_of
from tiny_models import tiny_llama

SGR = re.compile(r"\x1b\[[0-9;]*m")


def infer():
    model = tiny_llama()
    ids = torch.tensor([[1, 2, 3, 4, 5, 6, 7]])
    with torch.no_grad():
        outputs = model(input_ids=ids)
    breakpoint()
    return outputs


@pytest.fixture
def config_file(monkeypatch, tmp_path):
    """Write the config file llmpdb reads (through LLMPDB_CONFIG); the environment otherwise neutral."""
    path = tmp_path / "config.toml"
    monkeypatch.setenv("LLMPDB_CONFIG", str(path))
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("LLMPDB_COLOR", raising=False)

    def write(text: str):
        path.write_text(text)
        return path
    return write


def test_width_from_the_config_file(config_file):
    config_file("width = 60\n")
    narrow, narrow_stats = outputs_of(debug_transcript(infer, ["c", "shapes", "shapes --stats", "c"], width=None))[:2]
    config_file("width = 160\n")
    wide, wide_stats = outputs_of(debug_transcript(infer, ["c", "shapes", "shapes --stats", "c"], width=None))[:2]
    assert max(len(line) for line in (narrow + "\n" + narrow_stats).splitlines()) <= 60
    assert max(len(line) for line in (wide + "\n" + wide_stats).splitlines()) <= 160
    assert max(len(line) for line in wide.splitlines()) > 60  # the wide one used its room
    # narrow: paths cut in the middle, dims abbreviated with a legend; the wide table keeps both whole
    assert "outputs.cache.layers[0].values" in wide and "outputs.cache.layers[0].values" not in narrow
    assert "batch · kv_heads · seq · head_dim" in wide and "b·kvh·s·hd" in narrow
    assert "dims abbreviated" in narrow and "dims abbreviated" not in wide
    # with statistics the narrow table has to drop columns, and says which
    wide_header, narrow_header = wide_stats.splitlines()[0].split(), narrow_stats.splitlines()[0].split()
    assert wide_header == ["path", "shape", "dtype", "size", "min", "max", "mean", "std", "dims"]
    assert set(narrow_header) < set(wide_header)
    dropped = [c for c in wide_header if c not in narrow_header]
    assert f"column{'s' * (len(dropped) > 1)} hidden to fit 60 columns" in narrow_stats
    assert "hidden to fit" not in wide_stats


def test_shapes_stats_default_and_flags_win(config_file):
    config_file("[shapes]\nstats = true\n")
    out = outputs_of(debug_transcript(infer, ["c", "shapes ids", "shapes ids --no-stats", "shapes ids --stats",
                                              "shapes ids --stats --no-stats", "c"]))
    assert out[0].splitlines()[0].split()[-4:] == ["min", "max", "mean", "std"]
    assert "min" not in out[1].splitlines()[0].split()
    assert out[2].splitlines()[0] == out[0].splitlines()[0]
    assert out[3].startswith("*** shapes: --stats and --no-stats together")
    config_file("[shapes]\nstats = false\n")
    out = outputs_of(debug_transcript(infer, ["c", "shapes ids", "c"]))
    assert "min" not in out[0].splitlines()[0].split()


def test_color_setting_reaches_a_debugger_on_a_pipe(config_file, monkeypatch):
    config_file('color = "always"\n[colors]\ndtype = "blue"\n')
    out = outputs_of(debug_transcript(infer, ["c", "shapes ids", "nope", "c"], color=None))
    assert "\x1b[34mi64\x1b[0m" in out[0]
    assert out[1].startswith(f"\x1b[{Style().code('error')}m*** ")
    monkeypatch.setenv("NO_COLOR", "1")
    out = outputs_of(debug_transcript(infer, ["c", "shapes ids", "nope", "c"], color=None))
    assert not SGR.search("".join(out))
    monkeypatch.delenv("NO_COLOR")
    config_file('color = "never"\n')
    monkeypatch.setenv("TERM", "xterm")
    out = outputs_of(debug_transcript(infer, ["c", "shapes ids", "nope", "c"], color=None))
    assert not SGR.search("".join(out)) and out[1].startswith("*** NameError")


def test_bad_config_one_warning_then_defaults(config_file):
    path = config_file('width = "wide"\ncolour = "never"\n')
    text = debug_transcript(infer, ["c", "shapes ids", "c"], width=None)
    warnings = [line for line in text.splitlines() if "llmpdb: config" in line]
    assert len(warnings) == 2  # one line per bad key, printed once though there are two stops
    assert all(str(path) in line for line in warnings)
    assert "width" in warnings[0] and "'colour'" in warnings[1]
    table = outputs_of(text)[0]
    assert strip_ansi(table) == table and max(len(line) for line in table.splitlines()) <= 100
