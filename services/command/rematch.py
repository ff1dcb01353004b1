"""A rematch of a finished match: who must ask for it, and how the next table is seated.

Pure rules over the finished match's state; AskRematch and GetRematch (`CommandApp`) do the I/O.
The same game, seat count and options (the clocks included), a deal the server draws anew, and
every seat moved one on (seat s sits at s + 1, the last at 0), so the first to play changes from
one match to the next. The bots' seats stay the bots', with their policies; a seat whose player
was away at the end (it left, or its clock ran out too often) goes to the bots, with the policy
that played it. Every other seat is a person's, and the rematch is made only once each of them
asked for it: nobody is sat at a table they never asked for, whose clock would then play for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from famiglia.grpcutil.errors import FailedPrecondition
from famiglia.matchstate import MatchState
from famiglia.v1 import envelope_pb2


@dataclass(frozen=True)
class Rematch:
    """Where a finished match's rematch stands, as one seat (or a spectator) may know it."""

    asked: tuple[int, ...]
    """The seats of the finished match whose players asked, in seat order."""
    waiting_for: tuple[int, ...]
    """The persons' seats not asked yet; none once the rematch is made."""
    match_id: str = ""
    """The rematch, once made."""
    seat: int = -1
    """The caller's seat in the rematch (its seat moved one on); -1 for a spectator."""
    seat_token: str = ""
    """The caller's token there, once made (a seat's only: a spectator gets none)."""


def check_rematch(m: MatchState) -> None:
    """Refuse a rematch of a match that cannot have one: still in play (`match_not_over`),
    cancelled by an operator (`match_cancelled`: it did not end by its rules), or a tournament's
    (`tournament_match`: its runner plans the tournament's matches)."""
    if m.cancelled is not None:
        raise FailedPrecondition("match_cancelled", "an operator cancelled this match: it has no rematch")
    if not m.finished:
        raise FailedPrecondition("match_not_over", "a rematch is asked once the match is over")
    if m.created.tournament_id:
        raise FailedPrecondition("tournament_match", "a tournament's matches are planned by its runner: "
                                                     "no rematch")


ASKED_WITHIN_S = 29 * 86_400
"""How long after its end a match takes a new ask: a day less than the asks live after their last
write (`rematch_asks.REMATCH_TTL_S`, 30 days; the day for the hosts' clocks). The rematch made by
an ask in time is found by every later call while the asks last, and past them no table begins
again: a match kept in Redis longer than its asks (the retention off, or the projection down)
had a second rematch, and GetRematch forgot the first."""


REMATCH_SWEEP_S = 30.0
"""How often each command process makes the rematches whose creation was lost
(`CommandApp.finish_rematches`): the table asked in full, the asker's process died before the
match was created."""

REMATCH_GRACE_S = 30.0
"""How old a pending creation is before the sweep makes it: an ask may be making it now."""


def too_late(m: MatchState, now_s: float) -> FailedPrecondition | None:
    """The refusal of a rematch that was not made in time (`ASKED_WITHIN_S` after the match's
    last event, its end), if `now_s` is past it: a caller finds one made before in the asks."""
    if now_s * 1000 - m.last_timestamp_ms <= ASKED_WITHIN_S * 1000:
        return None
    return FailedPrecondition("rematch_too_late", f"a rematch is asked within {ASKED_WITHIN_S // 86_400} days "
                                                  "of the match's end, and none was made in time")


def persons(m: MatchState) -> tuple[int, ...]:
    """The seats whose players must ask: a person's seat (not a bot's) not away at the end."""
    bots = {info.seat for info in m.created.seat_info if info.bot}
    return tuple(s for s in range(m.seats) if s not in bots and s not in m.away)


def moved_on(seat: int, seats: int) -> int:
    """Where a seat of the finished match sits in its rematch."""
    return (seat + 1) % seats


def seating(m: MatchState) -> list[envelope_pb2.SeatInfo]:
    """The rematch's `seat_info`: the finished match's, each seat moved one on, the seats away
    at the end the bots' (their player's id and name dropped: a bot's seat is nobody's, and
    its rating is not the player's)."""
    infos = {info.seat: info for info in m.created.seat_info}
    seated = []
    for seat in range(m.seats):
        info, away = infos.get(seat), m.away.get(seat)
        if away is not None:
            seated.append(envelope_pb2.SeatInfo(seat=moved_on(seat, m.seats), bot=True, policy=away[0].policy))
        elif info is not None:
            moved = envelope_pb2.SeatInfo()
            moved.CopyFrom(info)
            moved.seat = moved_on(seat, m.seats)
            seated.append(moved)
    return sorted(seated, key=lambda i: i.seat)


def seat_there(seat_info: Sequence[envelope_pb2.SeatInfo], seats: int, seat: int,
               player_id: str) -> tuple[int, str] | None:
    """(its seat, its player id) at the rematch seated so (`seating`) for the token of the
    finished match's `seat` naming `player_id`, if a person plays it there: none for a seat the
    bots play (a bot's, or one away at the end), whose token would read the bot's hidden cards
    and command its seat. From the rematch's seating alone, so it is answered alike once the
    finished match is archived."""
    if not 0 <= seat < seats:
        return None
    there = moved_on(seat, seats)
    info = next((i for i in seat_info if i.seat == there), None)
    if info is not None and info.bot:
        return None
    player = info.player_id if info is not None else ""
    return (there, player) if player == player_id else None
