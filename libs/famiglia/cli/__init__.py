"""The `famiglia` command line: run, up, down, status, play (and more as services land)."""

from __future__ import annotations

from typing import Any

from rich.text import Text

#: The width of values that are copied rather than read (ids, game ids): never cut short,
#: however narrow the terminal (or 80 columns when the output is piped).
COPIED_WIDTHS = {"match id": 20, "id": 16, "game": 16}


def add_column(table: Any, name: str, **options: Any) -> None:
    """`table.add_column`, keeping the copied columns whole."""
    width = COPIED_WIDTHS.get(name)
    if width is not None:
        options.setdefault("no_wrap", True)
        options["min_width"] = max(width, options.get("min_width") or 0)
    table.add_column(name, **options)


def add_plain_row(table: Any, *cells: str) -> None:
    """`table.add_row` of cells shown as they are: ids, names, entrants and game text come from
    servers and people, and a `[/x]` in one, read as rich markup, was a MarkupError and its
    traceback (exit 1) instead of the table."""
    table.add_row(*(Text(cell) for cell in cells))
