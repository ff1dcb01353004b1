"""The data matchmaking reasons about: tickets waiting in a pool and the tables proposed from them."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

OptionCheck = Callable[[int, Mapping[str, str]], tuple[str, str] | None]
"""(seats, options with defaults filled in) -> None when the game can set up that table, else
(code, message): the refusal CreateMatch would answer, with the game's rule id."""


@dataclass(frozen=True, slots=True)
class GameShape:
    """What matchmaking needs to know of a game: table sizes and options (from its GameInfo).

    `check_options` asks the game itself whether it accepts a ticket's options at a table size
    (types, ranges, combinations), so that a ticket CreateMatch would refuse is never queued."""

    game_id: str
    min_players: int
    max_players: int
    option_defaults: Mapping[str, str] = field(default_factory=dict)
    option_choices: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    check_options: OptionCheck | None = None

    @property
    def seat_counts(self) -> frozenset[int]:
        return frozenset(range(self.min_players, self.max_players + 1))


@dataclass(frozen=True, slots=True)
class Ticket:
    """One queued request for a table: a player, or a party that must sit together.

    `rating` is the party's mean mu: the party is matched as one unit. `pool` names the
    game and the canonical options, so only tickets of one pool can ever share a table.
    """

    ticket_id: str
    game_id: str
    pool: str
    players: tuple[str, ...]
    seat_counts: frozenset[int]
    rating: float
    created_ms: int

    @property
    def size(self) -> int:
        return len(self.players)

    def waited(self, now_ms: int) -> float:
        """Seconds in the queue."""
        return max(0.0, (now_ms - self.created_ms) / 1000.0)


@dataclass(frozen=True, slots=True)
class Proposal:
    """A table the matcher would like to form: these tickets plus `bots` bot seats."""

    game_id: str
    pool: str
    seats: int
    tickets: tuple[Ticket, ...]

    @property
    def humans(self) -> int:
        return sum(t.size for t in self.tickets)

    @property
    def bots(self) -> int:
        return self.seats - self.humans

    @property
    def players(self) -> tuple[str, ...]:
        return tuple(p for t in self.tickets for p in t.players)

    @property
    def proposal_id(self) -> str:
        """Derived from the tickets and the table size, so every matcher that proposes the same
        table names it alike, and CreateMatch's request id makes its creation idempotent."""
        ids = "|".join(sorted(t.ticket_id for t in self.tickets))
        digest = hashlib.sha256(f"{self.game_id}|{self.seats}|{ids}".encode()).hexdigest()
        return "p" + digest[:24]
