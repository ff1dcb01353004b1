"""What a game's `determinize` read from one seat's View, kept for the next sample.

A search samples many worlds from one View, and reading its protobuf fields costs
about as much as dealing a world; each game's determinize reads the View once per
(View, seat) into its own table and deals from that."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from google.protobuf.message import Message

T = TypeVar("T")
V = TypeVar("V", bound=Message)


class ViewReadings(Generic[V, T]):
    """`read(view, seat)` once per View and seat. Keyed by the View's deterministic bytes,
    so a View changed after it was read, or another seat's reading, is never handed out
    for it. A few dozen readings are kept (a worker thinks about one decision at a time);
    the dict is cleared when full. Safe across threads: the worst case is one View read twice."""

    def __init__(self, read: Callable[[V, int], T], size: int = 64) -> None:
        self._read = read
        self._size = size
        self.tables: dict[tuple[bytes, int], T] = {}

    def __call__(self, view: V, seat: int) -> T:
        key = (view.SerializeToString(deterministic=True), seat)
        tables = self.tables
        table = tables.get(key)
        if table is None:
            if len(tables) >= self._size:
                tables.clear()
            table = tables[key] = self._read(view, seat)
        return table
