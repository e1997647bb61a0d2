"""render_table: padding, right alignment, shrinking to width, ANSI-aware widths."""

from llmpdb.render.style import Style, strip_ansi
from llmpdb.render.table import ellipsize, render_table


def test_columns_padded_and_right_aligned():
    text = render_table(["path", "size"], [["a", "1 B"], ["longer.path", "10.5 KiB"]], right=(1,))
    assert text == "path             size\na                 1 B\nlonger.path  10.5 KiB"


def test_shrinks_the_path_column_from_the_middle_to_fit():
    rows = [["outputs.past_key_values.layers[3].keys", "(1, 2, 9, 32)"]]
    text = render_table(["path", "shape"], rows, width=30, min_width=12)
    assert text.splitlines()[1] == "outputs…3].keys  (1, 2, 9, 32)"
    assert max(len(line) for line in text.splitlines()) <= 30


def test_never_widens_a_narrow_column():
    text = render_table(["p", "shape"], [["ab", "(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)"]], width=10, min_width=12)
    assert text.splitlines()[1].startswith("ab  (1, 2")


def test_colour_codes_do_not_count_as_width():
    style = Style(color=True)
    text = render_table(["name", "x"], [[style.bad("nan"), "1"]], style=style)
    assert strip_ansi(text) == "name  x\nnan   1"


def test_ellipsize():
    assert ellipsize("abcdefghij", 5) == "ab…ij"
    assert ellipsize("abc", 5) == "abc"
    assert ellipsize("abc", 1) == "…"
