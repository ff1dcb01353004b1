"""Who is told what of a match's turns (famiglia.eventstore.turn_notices): the dispatcher folds
every match, so it sees each person's seat become asked and each match end, and says so once.

Only a person is told: a named player's seat (`MatchCreated.seat_info[].player_id`, not a bot's),
while the bots do not play it (left, or away by its clock: `MatchState.away`), and not when its
own standing choice answers the ask at once (NP-D7's auto-pass). A seat is told of its own asks
only, a private one (a Nothing Personal window) included: each notice goes to the seat's own
player, so nobody learns whether another seat was asked, privately or not. A match naming
nobody has no `TurnWatch`: it is folded as before, at no cost.

An ask is known by where it began: the first seq of the command after which the game asks the
seat while it did not before, or after the seat's own answer (an optional command, a chat or an
offer, answers nothing: `clocks.answers`). The match is folded a command at a time to find it,
so the same stream gives the same names to every dispatcher, however its reads were cut (a read
may end in the middle of a command: its rest continues the same step, from the asks as they
stood before it) and whether it followed the match from its start or folded it again after a
restart: that is what makes a notice offered twice the same one (the store writes it once).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from famiglia.clocks import STANDING_ANSWER_S, answers
from famiglia.engine import Pending
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
    """person's seat asked now -> where its ask began: the first seq of the command that began it"""
    fresh: set[int] = field(default_factory=set)
    """seats whose ask began since the last notices (`turn_notices` tells them)"""
    over_told: bool = False
    step: tuple[tuple[int, str], int, int | None, dict[int, int]] | None = None
    """The command folded last: its (seat, command id), its first seq, the seat it answered for,
    and `since` before it. A read cut in its middle folds its rest as the same step."""


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
        key = (first.seat, first.command_id)
        if watch.step is not None and watch.step[0] == key:  # the rest of a command a read cut
            _key, start, answered, since = watch.step
        else:
            start, since = before + 1, dict(watch.since)
            answered = (first.seat if first.command_id and first.seat in watch.people
                        and answers(match.engine, first.command) else None)
            watch.step = (key, start, answered, since)
        look(match, watch, answered, start, since)


def _standing(pending: Pending) -> bool:
    """Whether the seat's own standing choice answers the ask at once (NP-D7's auto-pass: a
    clock shorter than `STANDING_ANSWER_S`), so its person is not asked: the seat chose not to be."""
    return 0 < pending.timeout_seconds < STANDING_ANSWER_S


def look(match: MatchState, watch: TurnWatch, answered: int | None = None, start: int | None = None,
         since: dict[int, int] | None = None) -> None:
    """Note the asks of the match as it is now; `answered`: the seat whose command made it so,
    `start` its first seq (the asks' name: the match's version without one), `since` the asks
    before it (`watch.since` without one)."""
    if match.state is None or match.finished:
        watch.since.clear()
        watch.fresh.clear()
        return
    at = match.version if start is None else start
    before = watch.since if since is None else since
    away = match.away
    asked = {p.seat for p in match.engine.pending(match.state)
             if p.seat in watch.people and p.seat not in away and not _standing(p)}
    now = {seat: before[seat] for seat in asked if seat in before and seat != answered}
    for seat in asked - now.keys():
        now[seat] = at
        if watch.since.get(seat) != at:  # told already if a read cut its command after it began
            watch.fresh.add(seat)
    watch.fresh &= now.keys()
    watch.since = now


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
