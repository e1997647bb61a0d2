"""The one-cell shortcut of ``visible_len`` agrees with wcwidth on every character it takes."""

import pytest

from llmpdb.render import style


def test_every_character_the_shortcut_takes_is_one_cell_for_wcwidth():
    wcwidth = pytest.importorskip("wcwidth").wcwidth
    latin = [chr(code) for code in range(0xA0, 0x300)]
    taken = [char for char in latin if style._narrow(char)] + sorted(style._NARROW_SYMBOLS)
    assert len(taken) >= len(latin) - 2 + len(style._NARROW_SYMBOLS)  # all but NBSP and the soft hyphen
    assert all(style._narrow(char) for char in taken)
    assert [char for char in taken if wcwidth(char) != 1] == []


@pytest.mark.parametrize("text, cells", [("注意力 heads", 12), ("a\u0301b", 2), ("x\u200by", 2),
                                         ("shape 2×8 → 16 …", 16), ("tab\there", 8)])
def test_visible_len_counts_cells_as_the_terminal_draws_them(text, cells):
    pytest.importorskip("wcwidth")
    assert style.visible_len(text) == cells
