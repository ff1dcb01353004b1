"""A ticket request made canonical, so that "compatible" is a plain comparison.

Two tickets can share a table when they are in the same pool (same game, same
options once defaults are filled in: `{}` and `{"variant": "<default>"}` are one
pool) and accept a common table size that fits everyone.

A ticket keeps only the table sizes at which the game accepts its options (the game's
`check_options`): a ticket no size fits is refused with the game's rule id, so no queued
ticket can make CreateMatch fail.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .model import GameShape


class InvalidRequest(ValueError):
    """A request no table could ever satisfy; `code` is stable for clients."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class TicketRequest:
    game_id: str
    seat_counts: frozenset[int]
    options: dict[str, str]
    pool: str


def pool_key(game_id: str, options: Mapping[str, str]) -> str:
    """A short stable name for (game, canonical options)."""
    canonical = json.dumps(dict(sorted(options.items())), separators=(",", ":"))
    return f"{game_id}:" + hashlib.sha256(canonical.encode()).hexdigest()[:12]


def normalize_request(shape: GameShape, seat_counts: Iterable[int], options: Mapping[str, str],
                      party_size: int) -> TicketRequest:
    """Validate and canonicalize; raises InvalidRequest."""
    unknown = sorted(set(options) - set(shape.option_defaults))
    if unknown:
        raise InvalidRequest("unknown_option", f"{shape.game_id} has no option(s) {', '.join(unknown)}")
    for key, value in options.items():
        choices = shape.option_choices.get(key, ())
        if choices and value not in choices:
            raise InvalidRequest("bad_option", f"{key} must be one of {', '.join(choices)}")
    full = {**shape.option_defaults, **options}
    asked = frozenset(seat_counts) or shape.seat_counts
    outside = sorted(asked - shape.seat_counts)
    if outside:
        raise InvalidRequest("bad_seat_count",
                             f"{shape.game_id} seats {shape.min_players}..{shape.max_players}, not {outside}")
    fitting = frozenset(n for n in asked if n >= party_size)
    if not fitting:
        raise InvalidRequest("party_too_big", f"a party of {party_size} fits no table of {sorted(asked)}")
    if shape.check_options is not None:
        fitting = _accepted_sizes(shape, fitting, full)
    return TicketRequest(shape.game_id, fitting, full, pool_key(shape.game_id, full))


def _accepted_sizes(shape: GameShape, sizes: frozenset[int], options: Mapping[str, str]) -> frozenset[int]:
    """The sizes at which the game accepts the options; none: the game's refusal for the smallest."""
    assert shape.check_options is not None
    refusals = {n: shape.check_options(n, options) for n in sorted(sizes)}
    accepted = frozenset(n for n, refusal in refusals.items() if refusal is None)
    if not accepted:
        n, (code, message) = next((n, r) for n, r in refusals.items() if r is not None)
        where = f"at a table of {n}" if len(sizes) == 1 else f"at any table of {sorted(sizes)}"
        raise InvalidRequest(code, f"{shape.game_id} refuses these options {where}: {message}")
    return accepted
