"""llmpdb/render/config_file.py on real files: paths, values, warnings, refused files, the cache."""

from __future__ import annotations

import os
import threading

import pytest

from llmpdb.render import config_file
from llmpdb.render.style import Style
from llmpdb.render.config_file import Config, config, config_path, load_config, parse_config, style_for, take_warnings

FULL = '''
color = "never"
width = 72
history_size = 50
banner = false
[colors]
dtype = "bold bright_green"
error = "magenta"
[shapes]
stats = true
'''


@pytest.fixture(autouse=True)
def no_user_config(monkeypatch, tmp_path):
    monkeypatch.setenv("LLMPDB_CONFIG", str(tmp_path / "absent.toml"))
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("LLMPDB_COLOR", raising=False)


def test_path_order(tmp_path):
    env = {"HOME": str(tmp_path)}
    assert config_path(env) == os.path.join(os.path.expanduser("~"), ".config", "llmpdb", "config.toml")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    assert config_path(env) == str(tmp_path / "xdg" / "llmpdb" / "config.toml")
    env["LLMPDB_CONFIG"] = str(tmp_path / "mine.toml")
    assert config_path(env) == str(tmp_path / "mine.toml")


def test_full_file_parsed(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(FULL)
    cfg = load_config(str(path))
    assert (cfg.color, cfg.width, cfg.history_size, cfg.banner) == ("never", 72, 50, False)
    assert cfg.colors == {"dtype": "bold bright_green", "error": "magenta"}
    assert cfg.shapes == {"stats": True}
    assert cfg.warnings == ()
    style = Style(True, cfg.colors)
    assert style.dtype("f32") == "\x1b[1;92mf32\x1b[0m" and style.error("x") == "\x1b[35mx\x1b[0m"
    assert style.device("cpu") == "\x1b[35mcpu\x1b[0m"  # a role the file leaves alone keeps its colour


def test_no_file_is_defaults():
    assert config() == Config()
    assert take_warnings() == []


def test_bad_values_warn_once_each_and_keep_defaults(monkeypatch, tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('color = "sometimes"\nwidth = "wide"\nbanner = 1\nzoom = 2\nhistory_size = 20\n'
                    '[colors]\ndtype = "purpleish"\nnope = "red"\n[shapes]\nstats = "yes"\ncolour = true\n')
    monkeypatch.setenv("LLMPDB_CONFIG", str(path))
    cfg = config()
    assert (cfg.color, cfg.width, cfg.banner, cfg.colors, cfg.shapes) == ("auto", None, True, {}, {"stats": False})
    assert cfg.history_size == 20  # the good key still counts
    keys = ["color", "width", "banner", "'zoom'", "colors.dtype", "colors.nope", "shapes.stats", "shapes.colour"]
    assert len(cfg.warnings) == len(keys)
    for key, warning in zip(keys, cfg.warnings):
        assert str(path) in warning and key in warning and "\n" not in warning
    assert take_warnings() == list(cfg.warnings)
    assert take_warnings() == []  # once per process


def test_invalid_toml_one_warning(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text("color = \n[[[")
    cfg = load_config(str(path))
    assert cfg.color == "auto" and len(cfg.warnings) == 1
    assert "not valid TOML" in cfg.warnings[0] and str(path) in cfg.warnings[0]


def test_huge_file_refused(tmp_path):
    path = tmp_path / "huge.toml"
    path.write_text("# " + "x" * (config_file.MAX_BYTES + 10) + "\ncolor = \"never\"\n")
    cfg = load_config(str(path))
    assert cfg.color == "auto" and "larger than 64 KiB" in cfg.warnings[0]


def test_fifo_and_directory_refused_without_blocking(tmp_path):
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)  # nobody writes: a blocking open or read would hang
    results = []
    thread = threading.Thread(target=lambda: results.append(load_config(str(fifo))), daemon=True)
    thread.start()
    thread.join(10)
    assert results, "reading a FIFO blocked"
    assert "not a regular file" in results[0].warnings[0]
    assert "not a regular file" in load_config(str(tmp_path)).warnings[0]


def test_reread_when_the_file_changes(monkeypatch, tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("width = 70\n")
    monkeypatch.setenv("LLMPDB_CONFIG", str(path))
    assert config().width == 70
    path.write_text("width = 130\n# longer\n")
    assert config().width == 130


def test_color_setting_against_the_environment(monkeypatch, tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('color = "always"\n')
    monkeypatch.setenv("LLMPDB_CONFIG", str(path))
    assert style_for(None).color  # no stream at all, still on
    monkeypatch.setenv("NO_COLOR", "1")
    assert not style_for(None).color
    path.write_text('color = "never"\n')
    monkeypatch.delenv("NO_COLOR")
    assert not style_for(None).color
    monkeypatch.setenv("LLMPDB_COLOR", "1")
    assert style_for(None).color


def test_parse_config_never_raises_on_odd_types():
    cfg = parse_config('colors = 3\nshapes = "x"\nwidth = true\n', "p.toml")
    assert cfg == Config(path="p.toml", warnings=cfg.warnings) and len(cfg.warnings) == 3


def test_auto_follows_the_terminal_and_term(monkeypatch):
    master, slave = os.openpty()
    try:
        with open(slave, "w", closefd=False) as tty, open(os.devnull, "w") as pipe_like:
            monkeypatch.setenv("TERM", "xterm")
            assert style_for(tty).color and not style_for(pipe_like).color
            monkeypatch.setenv("TERM", "dumb")
            assert not style_for(tty).color
            assert style_for(tty, True).color  # the debugger's explicit colour=True wins
    finally:
        os.close(master)
        os.close(slave)
