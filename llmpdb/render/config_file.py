"""llmpdb's configuration file: ``~/.config/llmpdb/config.toml`` read, validated, cached.

Usage::

    from llmpdb.render.config_file import config
    cfg = config()                 # a Config; defaults when there is no file or it is bad
    cfg.color, cfg.colors, cfg.width, cfg.shapes["stats"], cfg.history_size, cfg.banner
    for line in take_warnings(): print(line)   # each problem once per process
    style_for(sys.stdout)          # the Style the config asks for on this stream

Where: ``$LLMPDB_CONFIG`` when set, else ``$XDG_CONFIG_HOME/llmpdb/config.toml``, else
``~/.config/llmpdb/config.toml``. Keys (all optional)::

    color = "auto"            # "auto" | "always" | "never"
    width = 120               # table width (default: the terminal's)
    history_size = 1000       # lines of prompt history kept (the console layer reads it)
    banner = true             # the one-line command banner at the first stop
    [colors]                  # role = colour name ("bold red", "bright_cyan", "default")
    header = "bold"
    [shapes]                  # default options of the `shapes` command
    stats = false

An unknown key or a bad value is one warning naming the key and the file; that key keeps its default, the
rest of the file still counts. A file that is not a regular file (a FIFO, a directory) or is over 64 KiB is
refused without reading more than 64 KiB. Nothing here raises: a broken file means the defaults. Needs
``tomllib`` (Python 3.11+); on 3.10 the file is ignored with a one-line note.
"""

from __future__ import annotations

import os
import stat

from .style import ROLES, Style, color_code, color_enabled

__all__ = ["Config", "config", "config_path", "load_config", "parse_config", "take_warnings", "style_for",
           "MAX_BYTES"]

MAX_BYTES = 64 * 1024
_COLOR_MODES = ("auto", "always", "never")
_SHAPES_OPTIONS = {"stats": bool}


class Config:
    """The settings in effect; ``path`` is the file they came from (None: defaults only). Immutable and
    compared by value (a plain class rather than a frozen dataclass: it is defined on the way to the first
    prompt)."""

    FIELDS = ("color", "colors", "width", "shapes", "history_size", "banner", "path", "warnings")
    __slots__ = FIELDS

    def __init__(self, color: str = "auto", colors: dict | None = None, width: int | None = None,
                 shapes: dict | None = None, history_size: int = 1000, banner: bool = True,
                 path: str | None = None, warnings: tuple[str, ...] = ()):
        values = (color, {} if colors is None else colors,  # colors: role -> colour name, validated
                  width, {"stats": False} if shapes is None else shapes, history_size, banner, path, warnings)
        for name, value in zip(Config.FIELDS, values):
            object.__setattr__(self, name, value)

    def _values(self) -> tuple:
        return tuple(getattr(self, name) for name in Config.FIELDS)

    def __setattr__(self, name, value):
        raise AttributeError(f"Config is immutable: cannot set {name!r}")

    def __eq__(self, other):
        return type(other) is Config and self._values() == other._values()

    __hash__ = None  # its dicts make it unhashable, as the frozen dataclass was

    def __repr__(self) -> str:
        return "Config(" + ", ".join(f"{name}={getattr(self, name)!r}" for name in Config.FIELDS) + ")"


def config_path(env=None) -> str:
    """Usage: ``config_path()`` -> the file llmpdb reads (it may not exist)."""
    env = os.environ if env is None else env
    if env.get("LLMPDB_CONFIG"):
        return os.path.expanduser(env["LLMPDB_CONFIG"])
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "llmpdb", "config.toml")


def _read_limited(path: str) -> tuple[str | None, str | None]:
    """(text, None), (None, None) when there is no file, or (None, warning). Reads at most MAX_BYTES + 1."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"llmpdb: config {path}: cannot open ({exc.strerror or exc}); using defaults"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, f"llmpdb: config {path}: not a regular file; using defaults"
        if info.st_size > MAX_BYTES:
            return None, f"llmpdb: config {path}: larger than {MAX_BYTES // 1024} KiB; using defaults"
        data = os.read(fd, MAX_BYTES + 1)
    except OSError as exc:
        return None, f"llmpdb: config {path}: cannot read ({exc.strerror or exc}); using defaults"
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        return None, f"llmpdb: config {path}: larger than {MAX_BYTES // 1024} KiB; using defaults"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return None, f"llmpdb: config {path}: not UTF-8 text; using defaults"


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _shown_key(key) -> str:
    """A key from the file as data: itself when printable, else its ``repr`` (a newline or ESC never shows)."""
    text = str(key)
    return text if text.isprintable() else repr(text)


def parse_config(text: str, path: str = "config.toml") -> Config:
    """Usage: ``parse_config('color = "never"', path)`` -> a ``Config``; problems go to ``.warnings``."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        return Config(path=path, warnings=(f"llmpdb: config {path}: ignored (reading TOML needs Python 3.11+)",))
    where = _shown_key(path)  # the file's name in a warning, as data
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError, RecursionError) as exc:
        return Config(path=path, warnings=(f"llmpdb: config {where}: not valid TOML ({exc}); using defaults",))
    warnings: list[str] = []
    values: dict = {}

    def bad(key: str, why: str) -> None:
        warnings.append(f"llmpdb: config {where}: {key}: {why}; using the default")

    for key, value in data.items():
        if key == "color":
            if value in _COLOR_MODES:
                values["color"] = value
            else:
                bad(key, f"{value!r} is not one of {', '.join(_COLOR_MODES)}")
        elif key == "width":
            if _is_int(value) and 20 <= value <= 1000:
                values["width"] = value
            else:
                bad(key, f"{value!r} is not a whole number from 20 to 1000")
        elif key == "history_size":
            if _is_int(value) and 0 <= value <= 10_000_000:
                values["history_size"] = value
            else:
                bad(key, f"{value!r} is not a whole number from 0 to 10000000")
        elif key == "banner":
            if isinstance(value, bool):
                values["banner"] = value
            else:
                bad(key, f"{value!r} is not true or false")
        elif key == "colors":
            if not isinstance(value, dict):
                bad(key, "is not a table ([colors])")
                continue
            colors = {}
            for role, name in value.items():
                if role not in ROLES:
                    bad(f"colors.{_shown_key(role)}", f"unknown role (roles: {', '.join(ROLES)})")
                elif not isinstance(name, str) or color_code(name) is None:
                    bad(f"colors.{_shown_key(role)}",
                        f"{name!r} is not a colour name (e.g. \"bold red\", \"bright_cyan\")")
                else:
                    colors[role] = name
            values["colors"] = colors
        elif key == "shapes":
            if not isinstance(value, dict):
                bad(key, "is not a table ([shapes])")
                continue
            shapes = dict(Config().shapes)
            for option, setting in value.items():
                kind = _SHAPES_OPTIONS.get(option)
                if kind is None:
                    bad(f"shapes.{_shown_key(option)}", f"unknown option (options: {', '.join(_SHAPES_OPTIONS)})")
                elif not isinstance(setting, kind):
                    bad(f"shapes.{_shown_key(option)}", f"{setting!r} is not true or false")
                else:
                    shapes[option] = setting
            values["shapes"] = shapes
        else:
            warnings.append(f"llmpdb: config {where}: unknown key {key!r} ignored")
    return Config(path=path, warnings=tuple(warnings), **values)


def load_config(path: str | None = None) -> Config:
    """Usage: ``load_config("/tmp/x.toml")``; read and parse one file now (no cache)."""
    path = config_path() if path is None else path
    try:
        text, warning = _read_limited(path)
        if warning:
            return Config(path=path, warnings=(warning,))
        if text is None:
            return Config()
        return parse_config(text, path)
    except Exception as exc:  # never into the debuggee
        return Config(path=path, warnings=(f"llmpdb: config {path}: {type(exc).__name__}: {exc}; using defaults",))


_CACHE: dict = {}
_WARNED: set[str] = set()


def _signature(path: str):
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size, info.st_ino, stat.S_IFMT(info.st_mode))


def config() -> Config:
    """Usage: ``config().width``; the settings now in effect, read again only when the file changes."""
    path = config_path()
    key = (path, _signature(path))
    cached = _CACHE.get("key")
    if cached != key:
        _CACHE["key"], _CACHE["config"] = key, load_config(path)
    return _CACHE["config"]


def take_warnings() -> list[str]:
    """Usage: ``for line in take_warnings(): debugger.message(line)``; the current file's warnings not yet
    shown in this process (each once)."""
    fresh = [w for w in config().warnings if w not in _WARNED]
    _WARNED.update(fresh)
    return fresh


def style_for(stream, color: bool | None = None) -> Style:
    """Usage: ``style_for(debugger.stdout)``; colour per ``color`` when given, else the environment and the
    config file's ``color`` (``render.style.color_enabled``), in the config's ``[colors]``."""
    cfg = config()
    enabled = color if color is not None else color_enabled(stream, cfg.color)
    return Style(enabled, cfg.colors)
