"""Who plays a seat, as a stored match tells it: the `seat_left` and `seat_returned` events.

They are the server's (GameService.LeaveMatch, a turn clock run out too often, ReturnToMatch),
public, no engine's: no command re-runs them, so a verification and an import check them
against the rules the command service writes them by, and a replay shows them as they are.

- the envelope's seat is the payload's, a seat of the table, and no seat created as a bot's;
- no command is recorded on it, it is public, and its payload is the one its type says;
- `seat_left` names reason "left" or "timeouts" and a policy a read model stores (at most
  64 characters, no NUL); a seat already away takes another only as "left" over "timeouts"
  (its player, away by the clock, leaving for good);
- `seat_returned` only for a seat away by "timeouts" (a seat left for good is never taken back);
- neither after the match's end: a finished match takes no LeaveMatch (`match_over`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from google.protobuf.message import DecodeError

from famiglia.eventstore.envelopes import SEAT_LEFT, SEAT_RETURNED, open_seat_change
from famiglia.v1 import envelope_pb2
from famiglia.v1.envelope_pb2 import EventEnvelope

REASONS = frozenset({"left", "timeouts"})
"""A `seat_left`'s reasons: its player asked (for good), or its clock ran out too often."""
POLICY_MOST = 64
"""The longest policy the read models store (`match_seats.policy`)."""


def seat_change_problem(env: EventEnvelope, seats: int, bot_seats: Collection[int],
                        away: Mapping[int, str]) -> str:
    """What is wrong with seat change `env` at a `seats`-seat table whose seats `away` (seat ->
    the reason it was left for) are the bots' now, or "" when nothing is."""
    try:
        change = open_seat_change(env)
    except DecodeError as exc:
        return f"the {env.type} payload does not parse: {exc}"
    if env.payload_type and env.payload_type != change.DESCRIPTOR.full_name:
        return f"a {env.type} holds a {change.DESCRIPTOR.full_name}, not a {env.payload_type[:80]}"
    if env.command or env.visibility.kind != envelope_pb2.VISIBILITY_PUBLIC or env.visibility.seats:
        return f"a {env.type} is the server's public event, with no command"
    seat = change.seat
    if not 0 <= seat < seats:
        return f"a {env.type} names seat {seat} at a {seats}-seat table"
    if env.seat != seat:
        return f"a {env.type} of seat {seat} is recorded as seat {env.seat}'s"
    if seat in bot_seats:
        return f"seat {seat} was created as a bot's: no player to leave or come back"
    if env.type == SEAT_LEFT:
        assert isinstance(change, envelope_pb2.SeatLeft)
        if change.reason not in REASONS:
            return f"a seat_left's reason is 'left' or 'timeouts', not {change.reason[:40]!r}"
        if len(change.policy) > POLICY_MOST or "\x00" in change.policy:
            return f"a seat_left's policy is at most {POLICY_MOST} characters, without NUL"
        before = away.get(seat)
        if before is not None and not (before == "timeouts" and change.reason == "left"):
            return f"seat {seat} is away already ({before}): only 'left' may follow 'timeouts'"
    elif env.type == SEAT_RETURNED and away.get(seat) != "timeouts":
        why = "was left for good" if away.get(seat) == "left" else "is not away"
        return f"seat {seat} {why}: only a seat away by 'timeouts' is taken back"
    return ""


def fold_away(away: dict[int, str], env: EventEnvelope) -> None:
    """`away` after seat change `env` (a well-formed one: `seat_change_problem` said "")."""
    change = open_seat_change(env)
    if isinstance(change, envelope_pb2.SeatLeft):
        away[change.seat] = change.reason
    else:
        away.pop(change.seat, None)


def seat_change_text(env: EventEnvelope) -> str:
    """A seat change as a replay shows it."""
    try:
        change = open_seat_change(env)
    except (DecodeError, ValueError):
        return env.type.replace("_", " ")
    if isinstance(change, envelope_pb2.SeatLeft):
        how = "left the match" if change.reason == "left" else "let the clock run out too often"
        return f"seat {change.seat}'s player {how}: the bots play it ({change.policy or 'random'})"
    return f"seat {change.seat}'s player took the seat back from the bots"
