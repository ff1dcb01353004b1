"""The `famiglia` command line: run, up, down, status, play (and more as services land)."""

from __future__ import annotations

from typing import Any

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
