"""Records to text: tables, colours. Everything here returns strings and never prints."""

from .style import Style, color_enabled, strip_ansi
from .table import ellipsize, render_table

__all__ = ["Style", "color_enabled", "strip_ansi", "ellipsize", "render_table"]
