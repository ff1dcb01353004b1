"""A CreateMatch that created the match and then failed in transit (UNAVAILABLE, DEADLINE_EXCEEDED,
a broken channel): the match exists in the command service though the matcher was told nothing.
Only a retry of the same table with the same request id can find it, so the matcher keeps the
table (its tickets stay claimed) until CreateMatch answers. Giving the tickets back to the queue
after `max_attempts` made them a new table (other players, a bot, a cancel in between) under a
new request id: the first match was left with seats nobody held and its players sat twice."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import pytest

from famiglia.grpcutil.errors import FailedPrecondition
from famiglia.matchmaking import MatchPolicy
from famiglia.v1 import envelope_pb2
from services.matchmaking.bootstrap import Matchmaking
from services.matchmaking.creator import CreatedMatch, CreateFailed
from services.matchmaking.matcher import MatcherTuning
from services.matchmaking.store import DAY_MS, Keys

from .conftest import GAME, SECRET, FakeClock, RecordingCreator, make_mm

DUEL = "duel"


@dataclass
class LostReplies:
    """The command service creates the match, then the reply is lost `lose` times in a row."""

    inner: RecordingCreator
    lose: int = 0
    unforeseen: bool = False
    request_ids: list[str] = field(default_factory=list)

    def create_match(self, game_id: str, seats: int, *, options: Mapping[str, str],
                     seat_info: Sequence[envelope_pb2.SeatInfo], request_id: str) -> CreatedMatch:
        self.request_ids.append(request_id)
        created = self.inner.create_match(game_id, seats, options=options, seat_info=seat_info,
                                          request_id=request_id)
        if self.lose:
            self.lose -= 1
            if self.unforeseen:
                raise RuntimeError("the channel broke after sending")
            raise CreateFailed("DEADLINE_EXCEEDED: the reply did not come in time", permanent=False)
        return created


def _nobody_orphaned(mm: Matchmaking, creator: RecordingCreator, tickets: Mapping[str, str]) -> None:
    """Every created match is the one its players' tickets name; nobody sits in two."""
    seated = Counter(creator.seated_players())
    assert all(n == 1 for n in seated.values()), f"players in two matches: {seated}"
    for table in creator.tables.values():
        for info in table.seat_info:
            if info.bot:
                continue
            status = mm.app.ticket(info.player_id, tickets[info.player_id])
            assert (status.state, status.match_id) == ("matched", table.match_id), \
                f"{info.player_id} holds no seat token of {table.match_id} (ticket {status.state})"


def _mm(redis_url: str, creator: RecordingCreator, clock: FakeClock, *,
        backfill_after: float | None = None, unforeseen: bool = False,
        secret: str = SECRET, accepted_secret: str = "") -> tuple[Matchmaking, LostReplies]:
    mm = make_mm(redis_url, creator, clock=clock, policy=MatchPolicy(backfill_after=backfill_after),
                 tuning=MatcherTuning(claim_retry_ms=0, max_attempts=2), secret=secret,
                 accepted_secret=accepted_secret)
    lossy = LostReplies(creator, unforeseen=unforeseen)
    mm.matcher.creator = lossy
    return mm, lossy


@pytest.mark.parametrize("unforeseen", [False, True], ids=["deadline_exceeded", "unforeseen_error"])
def test_a_lost_reply_does_not_seat_the_players_at_another_table(redis_url: str, creator: RecordingCreator,
                                                                 unforeseen: bool) -> None:
    """A and B (tables of 2 or 3) get a table of 2; its replies are lost past max_attempts while C
    (2 or 3) queues: A, B and C used to become a table of 3, with A and B also seated in the first."""
    clock = FakeClock()
    mm, lossy = _mm(redis_url, creator, clock, unforeseen=unforeseen)
    a, b, c = (mm.app.register_guest(n)[0].player_id for n in "ABC")
    tickets = {a: mm.app.create_ticket(a, GAME, [2, 3], {}).ticket_id,
               b: mm.app.create_ticket(b, GAME, [2, 3], {}).ticket_id}
    lossy.lose = 4
    assert mm.matcher.run_once() == 0  # created, reply lost
    clock.advance(1)
    tickets[c] = mm.app.create_ticket(c, GAME, [2, 3], {}).ticket_id
    for _ in range(4):  # three more lost replies, then the answer: the first table's match
        mm.matcher.run_once()
        clock.advance(1)
    _nobody_orphaned(mm, creator, tickets)
    assert len(set(lossy.request_ids)) == 1, "every retry must ask for the same table"
    assert len(creator.tables) == 1
    assert mm.app.ticket(c, tickets[c]).state == "searching"
    mm.close()


def test_a_lost_reply_does_not_leave_a_bot_table_playing_alone(redis_url: str, creator: RecordingCreator) -> None:
    """A and B want a table of 3: after the backfill wait they get one with a bot; its replies are
    lost while C queues. The bot's table used to stay in the store with nobody at A's and B's
    seats while A, B and C played another."""
    clock = FakeClock()
    mm, lossy = _mm(redis_url, creator, clock, backfill_after=30)
    a, b, c = (mm.app.register_guest(n)[0].player_id for n in "ABC")
    tickets = {a: mm.app.create_ticket(a, GAME, [3], {}).ticket_id,
               b: mm.app.create_ticket(b, GAME, [3], {}).ticket_id}
    clock.advance(31)
    lossy.lose = 3
    assert mm.matcher.run_once() == 0
    [first] = creator.tables.values()
    assert sum(i.bot for i in first.seat_info) == 1
    tickets[c] = mm.app.create_ticket(c, GAME, [3], {}).ticket_id
    for _ in range(4):
        mm.matcher.run_once()
        clock.advance(1)
    assert len(creator.tables) == 1, "a second table was made while the bot's table exists"
    _nobody_orphaned(mm, creator, tickets)
    mm.close()


def test_a_table_waiting_for_its_reply_cannot_be_cancelled_out_of(redis_url: str,
                                                                  creator: RecordingCreator) -> None:
    """A duel whose replies are lost: B could cancel once the tickets were back in the queue,
    and A was then seated with C while A and B's match existed."""
    clock = FakeClock()
    mm, lossy = _mm(redis_url, creator, clock)
    a, b, c = (mm.app.register_guest(n)[0].player_id for n in "ABC")
    tickets = {a: mm.app.create_ticket(a, DUEL, [], {}).ticket_id,
               b: mm.app.create_ticket(b, DUEL, [], {}).ticket_id}
    lossy.lose = 2
    mm.matcher.tick(DUEL)  # created, reply lost
    mm.matcher._recover(DUEL, clock())  # the retry alone (a tick would claim the tickets again): lost too
    refused = ""
    try:
        mm.app.cancel(b, tickets[b])  # (it was accepted once the tickets were back in the queue)
    except FailedPrecondition as exc:
        refused = exc.code
    tickets[c] = mm.app.create_ticket(c, DUEL, [], {}).ticket_id
    mm.matcher.run_once()
    _nobody_orphaned(mm, creator, tickets)
    assert refused == "ticket_matched"
    assert len(set(lossy.request_ids)) == 1
    assert mm.app.ticket(a, tickets[a]).state == "matched"
    mm.close()


def test_a_lost_reply_retried_by_a_matcher_restarted_with_a_rotated_secret_asks_for_the_same_table(
        redis_url: str, creator: RecordingCreator) -> None:
    """The request id is keyed with the secret: derived again by a matcher restarted with the new
    one (docs/operations.md, "Rotating the secret"), it named another match, and the table whose
    answer was lost was made twice, the first with nobody at it. The claim writes it down."""
    clock = FakeClock()
    before, lost = _mm(redis_url, creator, clock)
    a, b = (before.app.register_guest(n)[0].player_id for n in "AB")
    tickets = {a: before.app.create_ticket(a, DUEL, [], {}).ticket_id,
               b: before.app.create_ticket(b, DUEL, [], {}).ticket_id}
    lost.lose = 1
    assert before.matcher.run_once() == 0  # made, its answer lost; then the matcher stops
    before.close()
    after, answered = _mm(redis_url, creator, clock, secret="the-rotated-secret", accepted_secret=SECRET)
    clock.advance(1)
    assert after.matcher.run_once() == 1
    assert answered.request_ids == lost.request_ids, "the retry must ask for the table first asked for"
    assert len(creator.tables) == 1
    _nobody_orphaned(after, creator, tickets)
    after.close()


def test_a_claimed_ticket_lives_as_long_as_its_table_is_retried(redis_url: str, creator: RecordingCreator) -> None:
    """A table is retried until CreateMatch answers, which an outage can make longer than a ticket's
    lifetime and retention: its tickets must still be there to take the seats (before, the hash
    expired and the match made at last was finalized onto nothing). Given back to the queue, a
    ticket has its own lifetime again."""
    clock = FakeClock()
    mm, lossy = _mm(redis_url, creator, clock)
    client = mm.app.store.client
    a, b = (mm.app.register_guest(n)[0].player_id for n in "AB")
    ta = mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    mm.app.create_ticket(b, DUEL, [], {})
    key = Keys(DUEL).ticket(ta)
    own = client.pttl(key)
    lossy.lose = 1
    mm.matcher.run_once()
    assert client.pttl(key) > DAY_MS - 60_000
    plan = mm.app.store.plan(DUEL, mm.app.store.get(ta).proposal)  # type: ignore[union-attr]
    assert plan is not None
    clock.advance(100)
    mm.app.store.release(DUEL, plan["proposal_id"], [(t, tuple(ps)) for t, ps in plan["tickets"]], requeue=True,
                         reason="hold lost", now_ms=clock(), claim=plan["claim"])
    assert own - 110_000 < client.pttl(key) < own - 90_000  # the lifetime left (100 s less), and the retention
    mm.close()


@dataclass
class SlowCreator:
    """A CreateMatch still out while `meanwhile` runs (another replica's pass)."""

    inner: LostReplies
    meanwhile: list[Callable[[], object]] = field(default_factory=list)

    def create_match(self, game_id: str, seats: int, *, options: Mapping[str, str],
                     seat_info: Sequence[envelope_pb2.SeatInfo], request_id: str) -> CreatedMatch:
        while self.meanwhile:
            self.meanwhile.pop()()
        return self.inner.create_match(game_id, seats, options=options, seat_info=seat_info,
                                       request_id=request_id)


def test_a_stale_claim_is_retried_by_one_replica_while_its_create_match_is_out(
        redis_url: str, creator: RecordingCreator) -> None:
    """Each replica read the stale claim and asked CreateMatch again while the first retry's was
    still out (each pass, once the claim was stale): the retry pushes the claim back first."""
    clock = FakeClock()
    tuning = MatcherTuning(claim_retry_ms=5000)
    first = make_mm(redis_url, creator, clock=clock, tuning=tuning)
    second = make_mm(redis_url, creator, clock=clock, tuning=tuning)
    lossy = LostReplies(creator, lose=1)
    slow = SlowCreator(lossy)
    first.matcher.creator = slow
    second.matcher.creator = lossy
    a, b = (first.app.register_guest(n)[0].player_id for n in "AB")
    tickets = {a: first.app.create_ticket(a, DUEL, [], {}).ticket_id,
               b: first.app.create_ticket(b, DUEL, [], {}).ticket_id}
    first.matcher.tick(DUEL)  # made, its answer lost: the claim waits for its retry
    clock.advance(6)
    slow.meanwhile.append(lambda: second.matcher.tick(DUEL))  # the other replica's pass, the retry's call out
    formed = first.matcher.tick(DUEL)
    assert len(lossy.request_ids) == 2, f"CreateMatch asked {len(lossy.request_ids)} times, not once per retry"
    assert formed == 1
    _nobody_orphaned(first, creator, tickets)
    first.close()
    second.close()


@dataclass
class PacedCreator:
    """A CreateMatch that runs one step of `steps` per call while it is out (time passing, another
    replica's pass), then answers."""

    inner: LostReplies
    steps: list[Callable[[], object]] = field(default_factory=list)

    def create_match(self, game_id: str, seats: int, *, options: Mapping[str, str],
                     seat_info: Sequence[envelope_pb2.SeatInfo], request_id: str) -> CreatedMatch:
        if self.steps:
            self.steps.pop(0)()
        return self.inner.create_match(game_id, seats, options=options, seat_info=seat_info,
                                       request_id=request_id)


@pytest.mark.parametrize("fresh_table", [False, True], ids=["second_retry", "new_claim"])
def test_a_table_asked_for_after_a_slow_one_in_the_same_pass_is_not_retried_by_another_replica(
        redis_url: str, creator: RecordingCreator, fresh_table: bool) -> None:
    """A pass's claims (a retry's, a new table's) were dated by the pass's start: after a slow
    CreateMatch earlier in the pass, the next table's claim was stale already when its CreateMatch
    went out, and another replica asked for it again at once, a CreateMatch that was not slow."""
    clock = FakeClock()
    tuning = MatcherTuning(claim_retry_ms=5000)
    first = make_mm(redis_url, creator, clock=clock, tuning=tuning)
    second = make_mm(redis_url, creator, clock=clock, tuning=tuning)
    lossy = LostReplies(creator, lose=1 if fresh_table else 2)
    paced = PacedCreator(lossy)
    first.matcher.creator = paced
    second.matcher.creator = lossy
    players = [first.app.register_guest(n)[0].player_id for n in "ABCD"]
    tickets = {p: first.app.create_ticket(p, DUEL, [], {}).ticket_id for p in players[:2]}
    first.matcher.tick(DUEL)  # made, the answer lost: the claim waits for its retry
    tickets |= {p: first.app.create_ticket(p, DUEL, [], {}).ticket_id for p in players[2:]}
    if not fresh_table:
        first.matcher.tick(DUEL)  # a second table waiting for its retry
    asked = len(lossy.request_ids)
    clock.advance(6)
    paced.steps += [lambda: clock.advance(8),  # the first retry's CreateMatch is slow
                    lambda: second.matcher.tick(DUEL)]  # the other replica's pass, the next table's call out
    formed = first.matcher.tick(DUEL)
    assert len(lossy.request_ids) - asked == 2, "the second table was asked for by both replicas"
    assert formed == 2
    _nobody_orphaned(first, creator, tickets)
    first.close()
    second.close()


def _replicas(redis_url: str, creator: RecordingCreator, clock: FakeClock,
              lossy: LostReplies) -> tuple[Matchmaking, Matchmaking, PacedCreator]:
    """Two replicas whose CreateMatch has the gRPC creator's deadline (10 s), the claim retry 5 s."""
    tuning = MatcherTuning(claim_retry_ms=5000, create_timeout_ms=10_000)
    first = make_mm(redis_url, creator, clock=clock, tuning=tuning)
    second = make_mm(redis_url, creator, clock=clock, tuning=tuning)
    paced = PacedCreator(lossy)
    first.matcher.creator = paced
    second.matcher.creator = lossy
    return first, second, paced


@pytest.mark.parametrize("retried", [False, True], ids=["new_claim", "claim_retry"])
def test_a_create_match_slower_than_the_claim_retry_is_not_asked_again_while_it_is_out(
        redis_url: str, creator: RecordingCreator, retried: bool) -> None:
    """A claim went stale `claim_retry_ms` (5 s) after it was made or its retry taken, though the
    CreateMatch asked for it may run to its deadline (10 s): another replica's pass in between asked
    for the same table again, beside the call still out. The claim now waits out the deadline."""
    clock = FakeClock()
    lossy = LostReplies(creator, lose=1 if retried else 0)
    first, second, paced = _replicas(redis_url, creator, clock, lossy)
    a, b = (first.app.register_guest(n)[0].player_id for n in "AB")
    tickets = {p: first.app.create_ticket(p, DUEL, [], {}).ticket_id for p in (a, b)}
    if retried:
        assert first.matcher.tick(DUEL) == 0  # made, the answer lost: the claim waits for its retry
        clock.advance(6)
    asked = len(lossy.request_ids)

    def slow() -> None:
        clock.advance(6)  # slower than the claim retry, within its deadline
        second.matcher.tick(DUEL)  # the other replica's pass while it is out

    paced.steps.append(slow)
    assert first.matcher.tick(DUEL) == 1
    assert len(lossy.request_ids) - asked == 1, "the table was asked for by both replicas at once"
    _nobody_orphaned(first, creator, tickets)
    first.close()
    second.close()


class Died(BaseException):
    """The matcher's process ends here."""


def test_a_claim_whose_matcher_died_during_create_match_is_retried_once_the_call_is_past_its_deadline(
        redis_url: str, creator: RecordingCreator) -> None:
    """The price of waiting out the deadline: a matcher that dies with its call out has its table
    retried after the deadline (and a second for the answer's way back), not after the claim retry."""
    clock = FakeClock()
    lossy = LostReplies(creator)
    first, second, paced = _replicas(redis_url, creator, clock, lossy)
    a, b = (first.app.register_guest(n)[0].player_id for n in "AB")
    tickets = {p: first.app.create_ticket(p, DUEL, [], {}).ticket_id for p in (a, b)}

    def dies() -> None:
        raise Died

    paced.steps.append(dies)
    with pytest.raises(Died):
        first.matcher.tick(DUEL)
    clock.advance(10.9)
    assert second.matcher.tick(DUEL) == 0 and lossy.request_ids == []
    clock.advance(0.2)
    assert second.matcher.tick(DUEL) == 1 and len(lossy.request_ids) == 1
    _nobody_orphaned(second, creator, tickets)
    first.close()
    second.close()


def test_a_late_failure_does_not_bring_forward_the_retry_another_replica_took_since(
        redis_url: str, creator: RecordingCreator) -> None:
    """A replica stalled past its CreateMatch's deadline wrote its failure late: retry_later moved
    the claim's retry back to "now", undoing the retry another replica had taken since, whose call
    was still out, and a third replica asked for the table beside it."""
    clock = FakeClock()
    lossy = LostReplies(creator, lose=1)
    first, second, paced = _replicas(redis_url, creator, clock, lossy)
    third = make_mm(redis_url, creator, clock=clock, tuning=MatcherTuning(claim_retry_ms=5000,
                                                                            create_timeout_ms=10_000))
    third.matcher.creator = lossy
    dies = PacedCreator(lossy)
    second.matcher.creator = dies
    a, b = (first.app.register_guest(n)[0].player_id for n in "AB")
    tickets = {p: first.app.create_ticket(p, DUEL, [], {}).ticket_id for p in (a, b)}

    def stalled() -> None:
        clock.advance(12)  # past the deadline and its margin (11 s): the claim is anybody's to retry

        def out() -> None:
            raise Died  # the second replica's call is out (it never comes back here)

        dies.steps.append(out)
        with pytest.raises(Died):
            second.matcher.tick(DUEL)  # takes the retry: due 11 s later, at 23 s

    paced.steps.append(stalled)
    assert first.matcher.tick(DUEL) == 0  # the match made, the answer lost, its failure written at 12 s
    asked = len(lossy.request_ids)
    clock.advance(10.9)  # 22.9 s: the second replica's call may still be out
    assert third.matcher.tick(DUEL) == 0
    assert len(lossy.request_ids) == asked, "the third replica asked while the second's call was out"
    clock.advance(0.2)
    assert third.matcher.tick(DUEL) == 1
    _nobody_orphaned(third, creator, tickets)
    for mm in (first, second, third):
        mm.close()


def test_replicas_with_other_claim_retries_read_the_same_due_time(
        redis_url: str, creator: RecordingCreator) -> None:
    """Mid-rollout, replicas ran with other FAMIGLIA_MM_CLAIM_RETRY: the claim's score was stored
    relative to its writer's claim retry, so a replica on a shorter one found the claim stale while
    the CreateMatch asked for it was still out, and asked for the table beside it."""
    clock = FakeClock()
    lossy = LostReplies(creator)
    first, _, paced = _replicas(redis_url, creator, clock, lossy)  # claim retry 5 s, deadline 10 s
    short = make_mm(redis_url, creator, clock=clock, tuning=MatcherTuning(claim_retry_ms=1000,
                                                                            create_timeout_ms=10_000))
    short.matcher.creator = lossy
    a, b = (first.app.register_guest(n)[0].player_id for n in "AB")
    tickets = {p: first.app.create_ticket(p, DUEL, [], {}).ticket_id for p in (a, b)}

    def slow() -> None:
        clock.advance(8)  # within the deadline (and its margin: 11 s)
        short.matcher.tick(DUEL)

    paced.steps.append(slow)
    assert first.matcher.tick(DUEL) == 1
    assert len(lossy.request_ids) == 1, "the replica on the shorter claim retry asked while the call was out"
    _nobody_orphaned(first, creator, tickets)
    first.close()
    short.close()
