"""What docs/matchmaking.md promises a client, checked on real Redis with a clock that moves only
when told: the rating window's growth and cap, a party's lifetime counted from when it queues,
what the watch stream sends, how long an ended ticket stays readable, the estimate per pool and
the codes of a cancel that came too late."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from famiglia.grpcutil.errors import FailedPrecondition
from famiglia.matchmaking import FixedRatings, MatchPolicy, Rating
from services.matchmaking.bootstrap import Matchmaking
from services.matchmaking.store import Keys

from .conftest import GAME, FakeClock, RecordingCreator, guests, make_mm

DUEL = "duel"
HOUR_MS = 3600 * 1000


@pytest.fixture()
def ratings() -> FixedRatings:
    return FixedRatings()


@pytest.fixture()
def patient(redis_url: str, creator: RecordingCreator, clock: FakeClock,
            ratings: FixedRatings) -> Iterator[Matchmaking]:
    """The documented defaults of the window and lifetimes, without bots."""
    mm = make_mm(redis_url, creator, clock=clock, ratings=ratings,
                 policy=MatchPolicy(window_start=3, window_growth=1, window_max=50, backfill_after=None,
                                    ticket_ttl=600, invite_ttl=120))
    yield mm
    mm.close()


def test_the_rating_window_widens_with_the_wait_and_stops_at_its_cap(patient: Matchmaking, clock: FakeClock,
                                                                    ratings: FixedRatings) -> None:
    a, b, c, d = guests(patient, "ABCD")
    ratings.set(a, Rating(25.0))
    ratings.set(b, Rating(35.0))  # 10 mu apart: a window of 3 + 7 s
    ratings.set(c, Rating(0.0))
    ratings.set(d, Rating(55.0))  # 55 apart: more than the window's cap of 50
    ta = patient.app.create_ticket(a, DUEL, [], {}).ticket_id
    patient.app.create_ticket(b, DUEL, [], {})
    tc = patient.app.create_ticket(c, GAME, [2], {}).ticket_id
    patient.app.create_ticket(d, GAME, [2], {})
    clock.advance(6.9)
    assert patient.matcher.run_once() == 0
    clock.advance(0.1)
    assert patient.matcher.run_once() == 1
    assert patient.app.ticket(a, ta).state == "matched"
    clock.advance(592)  # 599 s: the window has long stopped at 50
    assert patient.matcher.run_once() == 0
    clock.advance(1)
    patient.matcher.run_once()
    assert patient.app.ticket(c, tc).state == "expired"


def test_a_partys_lifetime_starts_when_its_last_invitee_accepts(patient: Matchmaking, clock: FakeClock) -> None:
    a, b = guests(patient, "AB")
    ticket = patient.app.create_ticket(a, GAME, [4], {}, party=[b]).ticket_id
    clock.advance(100)
    assert patient.app.accept_invite(b, ticket).state == "searching"
    clock.advance(599)
    patient.matcher.run_once()
    assert patient.app.ticket(a, ticket).state == "searching"  # 699 s after it was asked for
    clock.advance(1)
    patient.matcher.run_once()
    status = patient.app.ticket(b, ticket)
    assert (status.state, status.waited_s) == ("expired", 600.0)


def _watched(mm: Matchmaking, player: str, ticket: str, steps: list[Callable[[], object]]) -> list[tuple[str, tuple[str, ...]]]:
    """What a watch stream sends while `steps` happen one per poll; fails if it does not end after them."""
    todo = iter(steps)

    def poll(_seconds: float) -> None:
        step = next(todo, None)
        if step is None:
            raise AssertionError("the stream did not end after the ticket's last state")
        step()

    return [(s.state, s.awaiting) for s in mm.app.watch(player, ticket, sleep=poll, heartbeat_s=3600)]


def test_a_watch_sends_every_acceptance_then_the_match_and_ends(patient: Matchmaking) -> None:
    a, b, c, d = guests(patient, "ABCD")
    ticket = patient.app.create_ticket(a, GAME, [4], {}, party=[b, c]).ticket_id
    patient.app.create_ticket(d, GAME, [4], {})
    seen = _watched(patient, a, ticket, [lambda: None, lambda: patient.app.accept_invite(b, ticket),
                                         lambda: patient.app.accept_invite(c, ticket), patient.matcher.run_once])
    assert seen == [("pending", (b, c)), ("pending", (c,)), ("searching", ()), ("matched", ())]


def test_a_watch_ends_with_a_cancel(patient: Matchmaking) -> None:
    a = guests(patient, "A")[0]
    ticket = patient.app.create_ticket(a, DUEL, [], {}).ticket_id
    assert _watched(patient, a, ticket, [lambda: patient.app.cancel(a, ticket)]) == [("searching", ()), ("cancelled", ())]


def test_an_ended_ticket_stays_readable_for_an_hour(patient: Matchmaking, clock: FakeClock) -> None:
    a, b, c = guests(patient, "ABC")
    cancelled = patient.app.create_ticket(a, GAME, [], {}).ticket_id
    patient.app.cancel(a, cancelled)
    expired = patient.app.create_ticket(b, GAME, [], {}).ticket_id
    matched = patient.app.create_ticket(c, DUEL, [], {}).ticket_id
    patient.app.create_ticket(a, DUEL, [], {})
    assert patient.matcher.run_once() == 1
    clock.advance(600)
    patient.matcher.run_once()
    assert patient.app.ticket(b, expired).state == "expired"
    client = patient.app.store.client
    for game, ticket in ((GAME, cancelled), (GAME, expired), (DUEL, matched)):
        left = client.pttl(Keys(game).ticket(ticket))
        assert HOUR_MS - 60_000 < left <= HOUR_MS, (ticket, left)


def test_a_cancel_that_came_too_late_says_how_the_ticket_ended(patient: Matchmaking, clock: FakeClock) -> None:
    a, b, c = guests(patient, "ABC")
    expired = patient.app.create_ticket(a, GAME, [], {}).ticket_id
    declined = patient.app.create_ticket(b, DUEL, [], {}, party=[c]).ticket_id
    patient.app.decline_invite(c, declined)
    clock.advance(600)
    patient.matcher.run_once()
    for player, ticket, code in ((a, expired, "ticket_expired"), (b, declined, "ticket_failed")):
        with pytest.raises(FailedPrecondition) as late:
            patient.app.cancel(player, ticket)
        assert late.value.code == code


def test_the_estimate_is_the_pools_own_recent_wait(patient: Matchmaking, clock: FakeClock) -> None:
    """Tickets of other options are another pool: their waits say nothing of this one's."""
    a, b, c = guests(patient, "ABC")
    patient.app.create_ticket(a, GAME, [2], {"variant": "short"})
    clock.advance(40)
    patient.app.create_ticket(b, GAME, [2], {"variant": "short"})
    assert patient.matcher.run_once() == 1  # the short pool waited 20 s on average
    classic = patient.app.create_ticket(c, GAME, [2], {})
    assert classic.status.estimated_wait_s == 60.0  # no classic table yet: no recent wait to go by
