"""Who is told what of a match's turns (famiglia.eventstore.turn_notices): the dispatcher folds
every match, so it sees each person's seat become asked and each match end, and says so once.

Only a person is told: a named player's seat (`MatchCreated.seat_info[].player_id`, not a bot's),
while the bots do not play it (left, or away by its clock: `MatchState.away`), and not when its
own standing choice answers the ask at once (NP-D7's auto-pass). A seat is told of its own asks
only, a private one (a Nothing Personal window) included: each notice goes to the seat's own
player, so nobody learns whether another seat was asked, privately or not. A match naming
nobody has no `TurnWatch`: it is folded as before, at no cost.

One ask is a seat's unbroken stretch of being asked in its person's hands: it begins with the
command after which the game asks the seat while it did not before (or its player took it back
from the bots, or its standing choice stopped answering for it), and ends with the first command
after which it is not asked. The seat's own commands inside it begin no new one: a GoodCritters
seat that chooses its card stays asked until it commits (GC-D04), a Nostra City seat makes the
choices inside its turn (NC-D02), and its person, who just moved, is told once. An ask is
known by where it began, the first seq of that command. The match is folded a command at a time
to find it, so the same stream gives the same names to every dispatcher, however its reads were
cut (a read may end in the middle of a command: its rest continues the same step, from the asks
as they stood before it) and whether it followed the match from its start or folded it again
after a restart: that is what makes a notice offered twice the same one (the store writes it once).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from famiglia.clocks import STANDING_ANSWER_S
from famiglia.engine import Pending
from famiglia.eventstore.turn_notices import MATCH_OVER, STALE_SECONDS, YOUR_TURN, TurnNotice
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
    began_ms: dict[int, int] = field(default_factory=dict)
    """seat asked now -> when its ask began (its command's time, Unix ms): a stale one is not told"""
    over_told: bool = False
    step: tuple[tuple[int, str], int, dict[int, int]] | None = None
    """The command folded last: its (seat, command id), its first seq and `since` before it. A
    read cut in its middle folds its rest as the same step."""


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
            _key, start, since = watch.step
        else:
            start, since = before + 1, dict(watch.since)
            watch.step = (key, start, since)
        look(match, watch, start, since)


def _standing(pending: Pending) -> bool:
    """Whether the seat's own standing choice answers the ask at once (NP-D7's auto-pass: a
    clock shorter than `STANDING_ANSWER_S`), so its person is not asked: the seat chose not to be."""
    return 0 < pending.timeout_seconds < STANDING_ANSWER_S


def look(match: MatchState, watch: TurnWatch, start: int | None = None, since: dict[int, int] | None = None) -> None:
    """Note the asks of the match as it is now: `start`, the first seq of the command that made
    it so (a new ask's name: the match's version without one), `since` the asks before it
    (`watch.since` without one). An ask standing before it goes on, whoever moved."""
    if match.state is None or match.finished:
        watch.since.clear()
        watch.fresh.clear()
        watch.began_ms.clear()
        return
    at = match.version if start is None else start
    before = watch.since if since is None else since
    away = match.away
    asked = {p.seat for p in match.engine.pending(match.state)
             if p.seat in watch.people and p.seat not in away and not _standing(p)}
    now = {seat: before[seat] for seat in asked if seat in before}
    for seat in asked - now.keys():
        now[seat] = at
        if watch.since.get(seat) != at:  # told already if a read cut its command after it began
            watch.fresh.add(seat)
            watch.began_ms[seat] = match.last_timestamp_ms
    watch.fresh &= now.keys()
    watch.began_ms = {seat: ms for seat, ms in watch.began_ms.items() if seat in now}
    watch.since = now


def _stale(at_ms: int, now_ms: int | None) -> bool:
    """Whether something that happened at `at_ms` is too old to tell (STALE_SECONDS)."""
    return now_ms is not None and now_ms - at_ms > STALE_SECONDS * 1000


def turn_notices(match: MatchState, watch: TurnWatch, now_ms: int | None = None) -> list[TurnNotice]:
    """The your-turn notices of the asks that began since the last call, for the seats still
    asked: each to its seat's own player, with the seat's clock as it stands if it has
    one; none of an ask begun more than STALE_SECONDS before `now_ms` (Unix ms)."""
    if not watch.fresh:
        return []
    fresh, watch.fresh = [s for s in sorted(watch.fresh) if not _stale(watch.began_ms[s], now_ms)], set()
    if not fresh:
        return []
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


def over_notices(match: MatchState, watch: TurnWatch, now_ms: int | None = None) -> list[TurnNotice]:
    """A match just ended (finished or cancelled): every person still at it is told, once (a
    seat its player left for good is not its player's any more; one away by its clock is);
    nobody, when it ended more than STALE_SECONDS before `now_ms`."""
    if watch.over_told:
        return []
    watch.over_told = True
    watch.fresh.clear()
    if _stale(match.last_timestamp_ms, now_ms):
        return []
    return [TurnNotice(player, match.match_id, match.game_id, seat, MATCH_OVER, match.version,
                       at_ms=match.last_timestamp_ms, asked_at=match.version)
            for seat, player in sorted(watch.people.items())
            if not (seat in match.away and match.away[seat][0].reason == LEFT)]
