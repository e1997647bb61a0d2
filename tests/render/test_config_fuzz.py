"""Fuzz ``config_file.parse_config`` with ``hypothesis``: any text, and TOML documents built from llmpdb's own
keys with values of every type, keys holding newlines and escape sequences. The property: a ``Config``
always comes back (nothing raises), each warning is one line with no control character (a key from the
file is shown as data), and each example is quick."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from llmpdb.render.config_file import Config, parse_config

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KEYS = st.one_of(st.sampled_from(["color", "width", "history_size", "banner", "colors", "shapes", "header", "stats",
                                  "error", "a\nb", "\x1b[2J", "x\ry"]), st.text(max_size=6))
VALUES = st.one_of(st.sampled_from(['"auto"', '"never"', "120", "-1", "1e400", "inf", "nan", "true", '"bold red"',
                                    '"bright_cyan"', "[1, 2]", "{a = 1}", "1979-05-27", '"\\u001b[31m"',
                                    '"' + "x" * 3000 + '"', "0x10", "[[[[1]]]]"]),
                   st.integers().map(str), st.text(max_size=6).map(json.dumps))


def _toml_key(key: str) -> str:
    return json.dumps(key)  # a TOML basic string is JSON's: any key, quoted


@st.composite
def documents(draw) -> str:
    lines = [f"{_toml_key(draw(KEYS))} = {draw(VALUES)}" for _ in range(draw(st.integers(0, 4)))]
    for table in draw(st.lists(st.sampled_from(["colors", "shapes", "other", "colors.x"]), max_size=2, unique=True)):
        lines.append(f"[{table}]")
        lines += [f"{_toml_key(draw(KEYS))} = {draw(VALUES)}" for _ in range(draw(st.integers(0, 3)))]
    return "\n".join(lines) + "\n"


def _check(text: str) -> None:
    cfg = parse_config(text, "fuzz.toml")
    assert isinstance(cfg, Config)
    for line in cfg.warnings:
        assert line.isprintable(), repr(line)


@FUZZ
@given(documents())
@example('[colors]\n"a\\nb" = "red"\n')  # a role with a newline: shown escaped, one line
@example('[shapes]\n"\\u001b[2J" = true\n')  # an option that clears the screen: shown escaped
@example('"\\u001b[2J" = 1\n')
@example("width = 1e400\n")
def test_any_config_document_gives_a_config_and_one_line_warnings(text):
    _check(text)


@FUZZ
@given(st.text(max_size=200))
@example("a = [" * 3000)  # nested too deep
@example("\x00")
def test_any_text_gives_a_config(text):
    _check(text)


@FUZZ
@given(st.text(max_size=12))
@example("a\nllmpdb: config ok.toml: fine\x1b[2J.toml")  # $LLMPDB_CONFIG names the file: shown as data
def test_a_file_name_from_the_environment_is_shown_as_data(path):
    cfg = parse_config('width = "wide"\nnope = 1\n', path)
    assert cfg.path == path and len(cfg.warnings) == 2
    assert all(line.isprintable() for line in cfg.warnings), cfg.warnings
