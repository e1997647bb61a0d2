"""The console's key coalescing: runs of typed characters become one insertion, control keys stay keys."""

from __future__ import annotations

import pytest

pytest.importorskip("prompt_toolkit")

from prompt_toolkit.input.vt100_parser import Vt100Parser  # noqa: E402
from prompt_toolkit.keys import Keys  # noqa: E402

from llmpdb.console.keys import coalesce_keys  # noqa: E402


def _parse(data: str) -> list:
    keys: list = []
    parser = Vt100Parser(keys.append)
    parser.feed(data)
    parser.flush()
    return keys


def test_a_run_of_characters_is_its_first_key_then_one_paste_and_enter_stays_a_key():
    keys = coalesce_keys(_parse("p len('aaaa')\rc\r"))
    assert [k.key for k in keys] == ["p", Keys.BracketedPaste, Keys.ControlM, "c", Keys.ControlM]
    assert keys[1].data == " len('aaaa')"
    assert "".join(k.data for k in keys) == "p len('aaaa')\rc\r"  # type-ahead gives back the same bytes


def test_single_keys_and_escape_sequences_are_left_alone():
    keys = coalesce_keys(_parse("ab\x1b[A\x1bf\x1a"))
    assert [k.key for k in keys] == ["a", "b", Keys.Up, Keys.Escape, "f", Keys.ControlZ]
