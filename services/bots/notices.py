"""Who is told what of a match's turns (famiglia.eventstore.turn_notices): the dispatcher folds
every match, so it sees each person's seat become asked and each match end, and says so once.

Only a person is told: a named player's seat (`MatchCreated.seat_info[].player_id`, not a bot's),
while the bots do not play it (left, or away by its clock: `MatchState.away`). A seat is told of
its own asks only, a private one (a Nothing Personal window) included: each notice goes to the
seat's own player, so nobody learns whether another seat was asked, privately or not. A match
naming nobody has no `TurnWatch`: it is folded as before, at no cost.

An ask is known by the version it began at: the end of the command after which the game asks
the seat while it did not before, or after the seat's own answer (an optional command, a chat or
an offer, answers nothing: `clocks.answers`). The match is folded a command at a time to find
it, so the same stream gives the same versions to every dispatcher, however its reads were cut
and whether it followed the match from its start or folded it again after a restart: that is
what makes a notice offered twice the same one (the store writes it once).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from famiglia.clocks import answers
from famiglia.eventstore.turn_notices import MATCH_OVER, YOUR_TURN, TurnNotice
from famiglia.matchstate import MatchState
from famiglia.v1.envelope_pb2 import EventEnvelope

LEFT = "left"
"""`SeatLeft.reason` of a seat its player left for good (LeaveMatch): no longer its player's match."""


@dataclass
class TurnWatch:
    """What the dispatcher remembers of a match's people."""

    people: dict[int, str]
    """seat -> player id: the persons' seats of the match's creation"""
    since: dict[int, int] = field(default_factory=dict)
    """person's seat asked now -> the version its ask began at"""
    fresh: set[int] = field(default_factory=set)
    """seats whose ask began since the last notices (`turn_notices` tells them)"""
    over_told: bool = False


def watch_for(match: MatchState) -> TurnWatch | None:
    """The watch of a match that names a person; None for one of bots only (nothing to do)."""
    people = {info.seat: info.player_id for info in match.created.seat_info if info.player_id and not info.bot}
    return TurnWatch(people) if people else None


def _steps(envelopes: Sequence[EventEnvelope]) -> Iterator[Sequence[EventEnvelope]]:
    """The envelopes a command at a time: consecutive ones of one (seat, command id)."""
    start = 0
    for i in range(1, len(envelopes) + 1):
        if i == len(envelopes) or (envelopes[i].seat, envelopes[i].command_id) != (
                envelopes[start].seat, envelopes[start].command_id):
            yield envelopes[start:i]
            start = i


def fold_watching(match: MatchState, watch: TurnWatch, envelopes: Sequence[EventEnvelope]) -> None:
    """`match.apply(envelopes)` a command at a time, noting after each whose ask began."""
    for step in _steps(envelopes):
        before = match.version
        match.apply(step)
        if match.version == before:  # a redelivery: folded already
            continue
        first = step[0]
        answered = (first.seat if first.command_id and first.seat in watch.people
                    and answers(match.engine, first.command) else None)
        look(match, watch, answered)


def look(match: MatchState, watch: TurnWatch, answered: int | None = None) -> None:
    """Note the asks of the match as it is now; `answered`: the seat whose command made it so."""
    if match.state is None or match.finished:
        watch.since.clear()
        return
    away = match.away
    asked = {p.seat for p in match.engine.pending(match.state) if p.seat in watch.people and p.seat not in away}
    since = watch.since
    for seat in [s for s in since if s not in asked]:
        del since[seat]
        watch.fresh.discard(seat)
    for seat in asked:
        if seat not in since or seat == answered:
            since[seat] = match.version
            watch.fresh.add(seat)


def turn_notices(match: MatchState, watch: TurnWatch) -> list[TurnNotice]:
    """The your-turn notices of the asks that began since the last call, for the seats still
    asked: each to its seat's own player, with the seat's clock if it has one."""
    if not watch.fresh:
        return []
    fresh, watch.fresh = sorted(watch.fresh), set()
    pendings = match.engine.pending(match.state)
    timed = {p.seat for p in pendings if p.timeout_seconds > 0}
    deadlines = match.deadlines() if timed and match.clocks is not None else {}
    out = []
    for seat in fresh:
        runs_out = deadlines.get(seat) if seat in timed else None
        out.append(TurnNotice(watch.people[seat], match.match_id, match.game_id, seat, YOUR_TURN, match.version,
                              deadline_ms=0 if runs_out is None else round(runs_out * 1000),
                              at_ms=match.last_timestamp_ms, asked_at=watch.since[seat]))
    return out


def over_notices(match: MatchState, watch: TurnWatch) -> list[TurnNotice]:
    """A match just ended (finished or cancelled): every person still at it is told, once (a
    seat its player left for good is not its player's any more; one away by its clock is)."""
    if watch.over_told:
        return []
    watch.over_told = True
    watch.fresh.clear()
    return [TurnNotice(player, match.match_id, match.game_id, seat, MATCH_OVER, match.version,
                       at_ms=match.last_timestamp_ms, asked_at=match.version)
            for seat, player in sorted(watch.people.items())
            if not (seat in match.away and match.away[seat][0].reason == LEFT)]
