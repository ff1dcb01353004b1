"""Rules of the matchmaking scripts and guards that a mutation of the code once changed without
any other test noticing (each script guard, each Python guard)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import pytest

from famiglia.grpcutil.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from famiglia.matchmaking import MatchPolicy, form_matches, pool_key
from services.matchmaking.bootstrap import Matchmaking
from services.matchmaking.holds import Hold, hold_key
from services.matchmaking.matcher import MatcherTuning
from services.matchmaking.store import Keys
from tests.integration.matchmaking.conftest import GAME, FakeClock, RecordingCreator, make_mm
from tests.integration.matchmaking.conftest import guests as _guests

DUEL = "duel"


class Crash(BaseException):
    pass


def _crash(*_a: Any, **_k: Any) -> Any:
    raise Crash


@pytest.fixture()
def mm(redis_url: str, creator: RecordingCreator, clock: FakeClock) -> Iterator[Matchmaking]:
    service = make_mm(redis_url, creator, clock=clock,
                      policy=MatchPolicy(backfill_after=None, invite_ttl=60, ticket_ttl=600))
    yield service
    service.close()


def _propose(mm: Matchmaking, game: str, ticket_ids: list[str]) -> Any:
    """The proposal form_matches makes of exactly these queued tickets."""
    live = [r.to_ticket() for r in mm.app.store.queued(game) if r.ticket_id in ticket_ids]
    [proposal] = form_matches(live, mm.app.clock(), mm.matcher.policy)
    assert {t.ticket_id for t in proposal.tickets} == set(ticket_ids)
    return proposal


def _claim(mm: Matchmaking, game: str, ticket_ids: list[str]) -> tuple[Any, dict[str, Any]]:
    proposal = _propose(mm, game, ticket_ids)
    plan = mm.matcher.plan_table(proposal, {})
    assert mm.app.store.claim(proposal, plan, mm.app.clock())
    return proposal, plan


def _tickets(plan: dict[str, Any]) -> list[tuple[str, tuple[str, ...]]]:
    return [(t, tuple(ps)) for t, ps in plan["tickets"]]


def _finalize(mm: Matchmaking, plan: dict[str, Any], match_id: str = "m-x") -> int:
    fields = {t: {"match_id": match_id, "seats": str(plan["seats"]), "bots": "0"} for t, _ in plan["tickets"]}
    return mm.app.store.finalize(plan["game_id"], plan["proposal_id"], _tickets(plan), fields, mm.app.clock(),
                                 claim=plan["claim"])


# -- create_ticket.lua -------------------------------------------------------------------------
def test_an_invitees_invites_set_expires(mm: Matchmaking) -> None:
    """Guards a change the suite once missed (`if PTTL < ttl` -> false): the invites set would be a key without TTL, never cleaned up."""
    a, b = _guests(mm, "AB")
    mm.app.create_ticket(a, GAME, [], {}, party=[b])
    assert mm.app.store.client.pttl(Keys(GAME).invites(b)) > 0


# -- accept_invite.lua -------------------------------------------------------------------------
def test_accepting_a_ticket_that_vanished_reports_missing(mm: Matchmaking) -> None:
    """Guards a change the suite once missed (`if not st[1]` -> false): a ticket gone between read
    and accept answered 'None'; the service answers it NOT_FOUND unknown_ticket."""
    a, b = _guests(mm, "AB")
    ticket = mm.app.create_ticket(a, GAME, [], {}, party=[b]).ticket_id
    record = mm.app.store.get(ticket)
    assert record is not None
    mm.app.store.client.delete(Keys(GAME).ticket(ticket))
    assert mm.app.store.accept(record, b, mm.app.clock(), 600_000) == "missing"
    mm.app.store.get = lambda ticket_id: record  # type: ignore[method-assign]  # read before it went
    with pytest.raises(NotFound) as gone:
        mm.app.accept_invite(b, ticket)
    assert gone.value.code == "unknown_ticket"


def test_accepting_twice_keeps_the_first_acceptance(mm: Matchmaking, clock: FakeClock) -> None:
    """Guards a change the suite once missed (`if not found` -> false): a second accept moved the invitee's acceptance time (their
    wish's start, which decides whether a table they sat at since makes the ticket stale)."""
    a, b, c = _guests(mm, "ABC")
    ticket = mm.app.create_ticket(a, GAME, [], {}, party=[b, c]).ticket_id
    mm.app.accept_invite(b, ticket)
    first = mm.app.store.get(ticket).accepted_ms[b]  # type: ignore[union-attr]
    clock.advance(10)
    assert mm.app.accept_invite(b, ticket).awaiting == (c,)
    assert mm.app.store.get(ticket).accepted_ms[b] == first  # type: ignore[union-attr]


def test_a_queued_party_keeps_its_players_pointers_as_long_as_it_searches(mm: Matchmaking) -> None:
    """Guards a change the suite once missed (re-timing guard -> false): the creator's pointer kept its invite-time TTL (invite TTL
    + 60 s) while the ticket searched for the ticket TTL, so the creator could open a second
    ticket in the same game once it ran out."""
    a, b = _guests(mm, "AB")
    ticket = mm.app.create_ticket(a, GAME, [], {}, party=[b]).ticket_id
    assert mm.app.accept_invite(b, ticket).state == "searching"
    for p in (a, b):
        assert mm.app.store.client.pttl(Keys(GAME).open(p)) > (60 + 60) * 1000 + 5_000


# -- close_ticket.lua --------------------------------------------------------------------------
def test_closing_a_ticket_that_vanished_reports_missing(mm: Matchmaking) -> None:
    """Guards a change the suite once missed (`if not st[1]` -> false): the script crashed (INTERNAL) on a ticket gone meanwhile."""
    (a,) = _guests(mm, "A")
    ticket = mm.app.create_ticket(a, GAME, [], {}).ticket_id
    record = mm.app.store.get(ticket)
    assert record is not None
    mm.app.store.client.delete(Keys(GAME).ticket(ticket))
    assert mm.app.store.close_ticket(record, "cancelled", "x", mm.app.clock()) == (False, "missing")


@pytest.mark.parametrize("how", ["cancel", "decline", "expire"])
def test_ending_a_party_ticket_leaves_an_invitees_own_ticket_pointer(mm: Matchmaking, clock: FakeClock,
                                                                     how: str) -> None:
    """Guards a change the suite once missed (pointer guard -> true): ending a party ticket deleted the pointer of an invitee who had
    not accepted and had their own ticket in the game, so they could open a second one."""
    a, b = _guests(mm, "AB")
    own = mm.app.create_ticket(b, GAME, [], {}).ticket_id
    party = mm.app.create_ticket(a, GAME, [], {}, party=[b]).ticket_id
    if how == "cancel":
        mm.app.cancel(a, party)
    elif how == "decline":
        mm.app.decline_invite(b, party)
    else:
        clock.advance(61)
        mm.matcher.tick(GAME)
    assert mm.app.ticket(b, party).state in ("cancelled", "failed", "expired")
    assert mm.app.store.client.get(Keys(GAME).open(b)) == own
    with pytest.raises(AlreadyExists):
        mm.app.create_ticket(b, GAME, [], {})


# -- finalize.lua ------------------------------------------------------------------------------
def test_a_late_finalize_of_a_given_up_table_leaves_its_tickets_alone(mm: Matchmaking) -> None:
    """Guards a change the suite once missed (ticket guard -> true / -> claimed only): a matcher finishing a table that was
    given up meanwhile marked requeued tickets, or tickets claimed by another table, matched."""
    a, b, c = _guests(mm, "ABC")
    ta = mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    tb = mm.app.create_ticket(b, DUEL, [], {}).ticket_id
    old, old_plan = _claim(mm, DUEL, [ta, tb])
    assert mm.app.store.release(DUEL, old.proposal_id, _tickets(old_plan), requeue=True, reason="x",
                                now_ms=mm.app.clock(), claim=old_plan["claim"]) == 2
    tc = mm.app.create_ticket(c, DUEL, [], {}).ticket_id
    new, _ = _claim(mm, DUEL, [ta, tc])  # A goes to another table
    assert _finalize(mm, old_plan) == 0  # the old table's matcher comes back late
    ra, rb = mm.app.store.get(ta), mm.app.store.get(tb)
    assert ra is not None and (ra.state, ra.proposal, ra.match_id) == ("claimed", new.proposal_id, "")
    assert rb is not None and rb.state == "searching" and rb.match_id == ""


def test_finishing_a_table_keeps_a_players_pointer_to_a_newer_ticket(mm: Matchmaking) -> None:
    """Guards a change the suite once missed (pointer guard -> true): finalize deleted a pointer naming another ticket (the claimed
    ticket's pointer ran out during a long claim and the player queued again)."""
    a, b = _guests(mm, "AB")
    ta = mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    tb = mm.app.create_ticket(b, DUEL, [], {}).ticket_id
    _, plan = _claim(mm, DUEL, [ta, tb])
    mm.app.store.client.delete(Keys(DUEL).open(a))  # its TTL ran out
    newer = mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    assert _finalize(mm, plan) == 2
    assert mm.app.store.client.get(Keys(DUEL).open(a)) == newer


def test_finishing_a_table_twice_keeps_the_estimates(mm: Matchmaking, clock: FakeClock) -> None:
    """Guards a change the suite once missed (`done > 0` -> true): a second finalize (a slow matcher after the claim retry) divided
    0 by 0 and turned the pool's average wait into NaN."""
    a, b = _guests(mm, "AB")
    ta = mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    tb = mm.app.create_ticket(b, DUEL, [], {}).ticket_id
    _, plan = _claim(mm, DUEL, [ta, tb])
    clock.advance(4)
    assert _finalize(mm, plan) == 2
    assert _finalize(mm, plan) == 0
    recent = mm.app.store.recent_wait(DUEL, pool_key(DUEL, {}))
    assert recent is not None and not math.isnan(recent) and recent == pytest.approx(4.0)


def test_the_pools_average_wait_is_smoothed(mm: Matchmaking, clock: FakeClock) -> None:
    """Guards a change the suite once missed (`if old` -> false): the average wait is 0.8 old + 0.2 new, not the last wait alone."""
    a, b, c, d = _guests(mm, "ABCD")
    mm.app.create_ticket(a, DUEL, [], {})
    mm.app.create_ticket(b, DUEL, [], {})
    clock.advance(10)
    assert mm.matcher.run_once() == 1
    mm.app.create_ticket(c, DUEL, [], {})
    mm.app.create_ticket(d, DUEL, [], {})
    assert mm.matcher.run_once() == 1
    assert mm.app.store.recent_wait(DUEL, pool_key(DUEL, {})) == pytest.approx(8.0)


# -- release.lua -------------------------------------------------------------------------------
def test_releasing_a_table_finished_elsewhere_changes_nothing(mm: Matchmaking) -> None:
    """Guards a change the suite once missed (ticket guard -> true): a late release of a finalized table put matched tickets back
    in the queue (a ticket matched twice)."""
    a, b = _guests(mm, "AB")
    ta = mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    tb = mm.app.create_ticket(b, DUEL, [], {}).ticket_id
    proposal, plan = _claim(mm, DUEL, [ta, tb])
    assert _finalize(mm, plan) == 2
    assert mm.app.store.release(DUEL, proposal.proposal_id, _tickets(plan), requeue=True, reason="late",
                                now_ms=mm.app.clock(), claim=plan["claim"]) == 0
    assert {mm.app.store.get(t).state for t in (ta, tb)} == {"matched"}  # type: ignore[union-attr]
    assert mm.app.store.queue_size(DUEL) == 0


def test_releasing_a_given_up_table_late_leaves_the_next_claim_alone(mm: Matchmaking) -> None:
    """Guards a change the suite once missed (ticket guard -> claimed only): releasing a table twice undid another table's claim."""
    a, b, c = _guests(mm, "ABC")
    ta = mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    tb = mm.app.create_ticket(b, DUEL, [], {}).ticket_id
    old, old_plan = _claim(mm, DUEL, [ta, tb])
    mm.app.store.release(DUEL, old.proposal_id, _tickets(old_plan), requeue=True, reason="x", now_ms=mm.app.clock(),
                         claim=old_plan["claim"])
    tc = mm.app.create_ticket(c, DUEL, [], {}).ticket_id
    new, _ = _claim(mm, DUEL, [ta, tc])
    assert mm.app.store.release(DUEL, old.proposal_id, _tickets(old_plan), requeue=False, reason="late",
                                now_ms=mm.app.clock(), claim=old_plan["claim"]) == 0
    ra = mm.app.store.get(ta)
    assert ra is not None and (ra.state, ra.proposal) == ("claimed", new.proposal_id)


def test_a_requeued_ticket_still_counts_as_its_players_open_ticket(mm: Matchmaking) -> None:
    """Guards a change the suite once missed (`mode ~= requeue` -> true): requeueing deleted the pointers, so a player whose ticket
    went back to the queue (a lost hold) could open a second ticket in the same game."""
    a, b = _guests(mm, "AB")
    ta = mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    tb = mm.app.create_ticket(b, DUEL, [], {}).ticket_id
    proposal, plan = _claim(mm, DUEL, [ta, tb])
    assert mm.app.store.release(DUEL, proposal.proposal_id, _tickets(plan), requeue=True, reason="hold lost",
                                now_ms=mm.app.clock(), claim=plan["claim"]) == 2
    assert mm.app.store.get(ta).state == "searching"  # type: ignore[union-attr]  # really back in line
    with pytest.raises(AlreadyExists):
        mm.app.create_ticket(a, DUEL, [], {})


def test_a_ticket_cancelled_while_claimed_ends_cancelled_if_its_table_is_given_up(mm: Matchmaking) -> None:
    """The cancel was refused (`ticket_matched`: a match is being made), then the table lost a
    hold and went back to the queue: the player who asked to leave stayed in line and could be
    seated later. Its partner goes back to the queue as before."""
    a, b = _guests(mm, "AB")
    ta = mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    tb = mm.app.create_ticket(b, DUEL, [], {}).ticket_id
    proposal, plan = _claim(mm, DUEL, [ta, tb])
    with pytest.raises(FailedPrecondition) as refused:
        mm.app.cancel(a, ta)
    assert refused.value.code == "ticket_matched" and "cancelled if" in refused.value.message
    assert mm.app.store.release(DUEL, proposal.proposal_id, _tickets(plan), requeue=True, reason="hold lost",
                                now_ms=mm.app.clock(), claim=plan["claim"]) == 2
    ended = mm.app.ticket(a, ta)
    assert (ended.state, ended.reason) == ("cancelled", f"cancelled by {a}")
    assert mm.app.store.get(tb).state == "searching"  # type: ignore[union-attr]
    assert mm.app.store.queue_size(DUEL) == 1
    mm.app.create_ticket(a, DUEL, [], {})  # its player's open ticket is gone with it
    with pytest.raises(AlreadyExists):
        mm.app.create_ticket(b, DUEL, [], {})  # the partner's is still open


def test_a_ticket_cancelled_while_claimed_is_matched_if_its_table_is_made(mm: Matchmaking) -> None:
    a, b = _guests(mm, "AB")
    ta = mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    tb = mm.app.create_ticket(b, DUEL, [], {}).ticket_id
    _, plan = _claim(mm, DUEL, [ta, tb])
    with pytest.raises(FailedPrecondition):
        mm.app.cancel(a, ta)
    assert _finalize(mm, plan) == 2
    assert mm.app.ticket(a, ta).state == "matched"


def test_an_expiry_that_finds_a_ticket_claimed_leaves_it_to_go_back_to_the_queue(mm: Matchmaking) -> None:
    """close_ticket.lua writes a claimed ticket's end down only for a cancel (its player asked to
    leave): another matcher's expiry or a decline that finds it claimed must not, or the table's
    release would end the ticket cancelled, with that reason, instead of putting it back in line."""
    a, b = _guests(mm, "AB")
    ta = mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    tb = mm.app.create_ticket(b, DUEL, [], {}).ticket_id
    proposal, plan = _claim(mm, DUEL, [ta, tb])
    record = mm.app.store.get(ta)
    assert record is not None and record.state == "claimed"
    now = record.expires_ms + 1
    assert mm.app.store.close_ticket(record, "expired", "ticket lifetime reached", now, only_if_expired=True) == (
        False, "claimed")
    assert mm.app.store.close_ticket(record, "failed", "x declined", now, from_states=("pending",)) == (
        False, "claimed")
    assert mm.app.store.release(DUEL, proposal.proposal_id, _tickets(plan), requeue=True, reason="hold lost",
                                now_ms=mm.app.clock(), claim=plan["claim"]) == 2
    assert [r.state for r in (mm.app.store.get(ta), mm.app.store.get(tb))] == ["searching", "searching"]


def test_a_released_table_puts_its_tickets_back_at_their_old_place_in_line(mm: Matchmaking, clock: FakeClock) -> None:
    """release.lua ('requeue'): a table given up (a hold lost) puts its tickets back where they
    were, oldest first, not behind the tickets queued while it was claimed."""
    a, b, c = _guests(mm, "ABC")
    ta = mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    tb = mm.app.create_ticket(b, DUEL, [], {}).ticket_id
    proposal, plan = _claim(mm, DUEL, [ta, tb])
    clock.advance(5)
    tc = mm.app.create_ticket(c, DUEL, [], {}).ticket_id
    clock.advance(5)
    mm.app.store.release(DUEL, proposal.proposal_id, _tickets(plan), requeue=True, reason="hold lost",
                         now_ms=mm.app.clock(), claim=plan["claim"])
    assert [r.ticket_id for r in mm.app.store.queued(DUEL)][-1] == tc


def test_failing_a_table_keeps_a_players_pointer_to_a_newer_ticket(mm: Matchmaking) -> None:
    """Guards a change the suite once missed (pointer guard -> true): failing a table deleted a pointer naming another ticket."""
    a, b = _guests(mm, "AB")
    ta = mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    tb = mm.app.create_ticket(b, DUEL, [], {}).ticket_id
    proposal, plan = _claim(mm, DUEL, [ta, tb])
    mm.app.store.client.delete(Keys(DUEL).open(a))
    newer = mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    assert mm.app.store.release(DUEL, proposal.proposal_id, _tickets(plan), requeue=False, reason="refused",
                                now_ms=mm.app.clock(), claim=plan["claim"]) == 2
    assert mm.app.store.client.get(Keys(DUEL).open(a)) == newer
    assert mm.app.store.client.get(Keys(DUEL).open(b)) is None


# -- Python guards ----------------------------------------------------------------------------
def test_after_max_attempts_the_table_is_kept_and_retried_less_often(redis_url: str,
                                                                      creator: RecordingCreator) -> None:
    """Giving the tickets back to the queue after `max_attempts` (the old rule) let them form another table under another
    request id while the first CreateMatch, which failed only in transit, had made its match (test_ambiguous_creation.py).
    The table keeps its claim (a cancel is refused), and the retries slow down: `max_attempts` times the claim retry."""
    clock = FakeClock()
    mm = make_mm(redis_url, creator, clock=clock, tuning=MatcherTuning(claim_retry_ms=1000, max_attempts=2))
    a, b = _guests(mm, "AB")
    ta = mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    mm.app.create_ticket(b, DUEL, [], {})
    creator.fail_next = 3
    mm.matcher.tick(DUEL)  # first attempt
    clock.advance(1)
    mm.matcher.tick(DUEL)  # second: max_attempts, kept
    assert mm.app.store.get(ta).state == "claimed"  # type: ignore[union-attr]
    with pytest.raises(FailedPrecondition):
        mm.app.cancel(a, ta)
    clock.advance(1.9)
    mm.matcher.tick(DUEL)
    assert creator.calls == 2, "retried before max_attempts x claim retry"
    clock.advance(0.1)
    mm.matcher.tick(DUEL)  # third, failed too
    assert creator.calls == 3
    clock.advance(2)
    assert mm.matcher.tick(DUEL) == 1
    assert mm.app.ticket(a, ta).state == "matched" and len(creator.tables) == 1
    mm.close()


def test_a_late_success_after_another_matcher_finished_seats_the_holds(redis_url: str,
                                                                       creator: RecordingCreator) -> None:
    """Guards a change the suite once missed (not-done branch -> always free): a slow matcher whose table another matcher finished
    (and died before seating) freed the players' holds instead of seating them."""
    clock = FakeClock()
    slow = make_mm(redis_url, creator, clock=clock, tuning=MatcherTuning(claim_retry_ms=5000))
    rescuer = make_mm(redis_url, creator, clock=clock, tuning=MatcherTuning(claim_retry_ms=5000))
    rescuer.matcher._leave_other_queues = _crash  # type: ignore[method-assign]
    a, b = _guests(slow, "AB")
    slow.app.create_ticket(a, DUEL, [], {})
    slow.app.create_ticket(b, DUEL, [], {})

    class Slow:
        def create_match(self, *args: Any, **kwargs: Any) -> Any:
            clock.advance(6)
            with pytest.raises(Crash):
                rescuer.matcher.tick(DUEL)
            return creator.create_match(*args, **kwargs)

    slow.matcher.creator = Slow()  # type: ignore[assignment]
    assert slow.matcher.tick(DUEL) == 0
    for p in (a, b):
        held = slow.matcher.holds.get(p)
        assert held is not None and held.kind == "seated"
    for m in (slow, rescuer):
        m.close()


def test_a_lost_claim_gives_the_holds_back_at_once(mm: Matchmaking) -> None:
    """Guards a change the suite once missed (no `free` after a lost claim): the other players stayed leased for FAMIGLIA_MM_HOLD."""
    a, b = _guests(mm, "AB")
    ta = mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    mm.app.create_ticket(b, DUEL, [], {})
    claim = mm.app.store.claim

    def cancelled_first(*args: Any, **kwargs: Any) -> bool:
        mm.app.cancel(a, ta)  # A leaves just before the claim
        return claim(*args, **kwargs)

    mm.app.store.claim = cancelled_first  # type: ignore[method-assign]
    assert mm.matcher.tick(DUEL) == 0
    assert mm.matcher.holds.get(a) is None and mm.matcher.holds.get(b) is None


def test_a_too_long_request_id_is_refused(mm: Matchmaking) -> None:
    """`bad_request_id` on CreateTicket (documented), not a ticket keyed by a huge id."""
    (a,) = _guests(mm, "A")
    with pytest.raises(InvalidArgument) as bad:
        mm.app.create_ticket(a, DUEL, [], {}, request_id="r" * 129)
    assert bad.value.code == "bad_request_id"


def test_listing_invites_of_an_unknown_game_is_refused(mm: Matchmaking) -> None:
    """ListInvites { game_id: <unknown> } is INVALID_ARGUMENT unknown_game, not an empty list."""
    (a,) = _guests(mm, "A")
    with pytest.raises(InvalidArgument) as bad:
        mm.app.invites(a, "chess")
    assert bad.value.code == "unknown_game"


def test_a_claimed_tickets_players_keep_their_open_ticket_while_its_table_waits(mm: Matchmaking) -> None:
    """A table waits for CreateMatch as long as it must (a day at most, docs/matchmaking.md, "A creation
    without an answer"); its players' open-ticket pointers kept their ticket's lifetime (its TTL and a
    minute) and ran out first, so a player whose table was about to be made could open a second ticket
    in the game, one the coming match would never seat. Given back, the ticket's pointers get the
    lifetime it has left again."""
    a, b = _guests(mm, "AB")
    ta = mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    tb = mm.app.create_ticket(b, DUEL, [], {}).ticket_id
    proposal, plan = _claim(mm, DUEL, [ta, tb])
    client, k = mm.app.store.client, Keys(DUEL)
    claim_ttl = client.pttl(k.proposal(proposal.proposal_id))
    for p in (a, b):
        assert client.get(k.open(p)) in (ta, tb) and client.pttl(k.open(p)) >= claim_ttl - 60_000
    assert mm.app.store.release(DUEL, proposal.proposal_id, _tickets(plan), requeue=True, reason="hold lost",
                                now_ms=mm.app.clock(), claim=plan["claim"]) == 2
    for p in (a, b):  # back in line: the ticket's 600 s left and the pointer's minute
        assert 600_000 < client.pttl(k.open(p)) <= 660_000
    with pytest.raises(AlreadyExists):
        mm.app.create_ticket(a, DUEL, [], {})


# -- take_retry.lua ----------------------------------------------------------------------------
def test_a_claims_retry_is_taken_once_while_stale_and_never_once_the_table_is_gone(mm: Matchmaking) -> None:
    """The score moves only from stale (at most `older_than`) to now; a finished table's claim is
    not written anew (ZADD XX, and the proposal must exist)."""
    a, b = _guests(mm, "AB")
    ta = mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    tb = mm.app.create_ticket(b, DUEL, [], {}).ticket_id
    proposal, plan = _claim(mm, DUEL, [ta, tb])
    store, claimed, pid = mm.app.store, mm.app.clock(), proposal.proposal_id
    assert not store.take_retry(DUEL, pid, claimed - 1, claimed + 10, claim=plan["claim"])  # not stale yet
    assert store.client.zscore(Keys(DUEL).claims, pid) == claimed
    assert store.take_retry(DUEL, pid, claimed, claimed + 10, claim=plan["claim"])
    assert not store.take_retry(DUEL, pid, claimed, claimed + 20, claim=plan["claim"])  # taken: fresh again
    assert store.client.zscore(Keys(DUEL).claims, pid) == claimed + 10
    assert _finalize(mm, plan) == 2
    assert not store.take_retry(DUEL, pid, claimed + 100, claimed + 200, claim=plan["claim"])
    assert store.client.zscore(Keys(DUEL).claims, pid) is None


# -- retry_later.lua ---------------------------------------------------------------------------
def test_a_failed_attempt_moves_the_retry_only_from_the_score_its_caller_wrote(mm: Matchmaking) -> None:
    """A caller stalled past its deadline wrote its failure after another replica took the retry:
    the score went back to the caller's "now", and a third replica asked beside the call still out.
    The attempt counts either way; a fast failure brings the retry forward from the deadline."""
    a, b = _guests(mm, "AB")
    ta = mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    tb = mm.app.create_ticket(b, DUEL, [], {}).ticket_id
    proposal, plan = _claim(mm, DUEL, [ta, tb])
    store, claimed, pid, claims = mm.app.store, mm.app.clock(), proposal.proposal_id, Keys(DUEL).claims
    assert store.take_retry(DUEL, pid, claimed, claimed + 11_000, claim=plan["claim"])  # another replica's
    assert store.retry_later(DUEL, pid, claimed + 5000, claim=plan["claim"], written_ms=claimed) == 1
    assert store.client.zscore(claims, pid) == claimed + 11_000
    assert store.retry_later(DUEL, pid, claimed + 5000, claim=plan["claim"], written_ms=claimed + 11_000) == 2
    assert store.client.zscore(claims, pid) == claimed + 5000


# -- forget_claim.lua --------------------------------------------------------------------------
def test_a_gone_tables_claim_is_forgotten_but_never_the_same_table_claimed_again_meanwhile(
        mm: Matchmaking, monkeypatch: pytest.MonkeyPatch) -> None:
    """forget_claim looked for the proposal, then removed its claim: given back to the queue before
    the look and claimed again (the same tickets: the same proposal id) before the removal, the new
    claim lost its entry, and with it its retry should its matcher die: claimed, unretried, for a day."""
    a, b = _guests(mm, "AB")
    ta = mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    tb = mm.app.create_ticket(b, DUEL, [], {}).ticket_id
    proposal, plan = _claim(mm, DUEL, [ta, tb])
    store, pid, claims = mm.app.store, proposal.proposal_id, Keys(DUEL).claims
    store.release(DUEL, pid, _tickets(plan), requeue=True, reason="hold lost", now_ms=mm.app.clock(),
                  claim=plan["claim"])
    store.client.zadd(claims, {pid: 1})  # the stale claim _recover read before that release
    exists, claimed = store.client.exists, []

    def claimed_again_after_the_look(*keys: str) -> int:
        gone = exists(*keys)
        claimed.append(store.claim(proposal, plan, mm.app.clock()))  # another matcher
        return gone

    monkeypatch.setattr(store.client, "exists", claimed_again_after_the_look)
    store.forget_claim(DUEL, pid)
    monkeypatch.undo()
    if not claimed:  # the look and the removal are one script: the other matcher claims after both
        assert store.claim(proposal, plan, mm.app.clock())
    assert store.client.zscore(claims, pid) is not None, "the new claim lost its retry"
    assert _finalize(mm, plan) == 2
    store.client.zadd(claims, {pid: 1})
    store.forget_claim(DUEL, pid)  # a finished table's claim is forgotten
    assert store.client.zscore(claims, pid) is None


# -- claim tokens: a late release undoes only its own claim ------------------------------------
def test_a_matcher_stalled_past_its_holds_leaves_the_same_tables_newer_claim_alone(
        mm: Matchmaking, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """A matcher stalled between claim and pin (past its leases) while a retry gave its claim up and
    the same tickets were claimed again (the same proposal id) released that newer claim on waking:
    the tickets back in the queue (to be matched again), its holds freed, and its match made with
    nobody's tickets on it (finalize found none)."""
    a, b = _guests(mm, "AB")
    ta = mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    tb = mm.app.create_ticket(b, DUEL, [], {}).ticket_id
    proposal = _propose(mm, DUEL, [ta, tb])
    live = {r.ticket_id: r for r in mm.app.store.queued(DUEL)}
    plan = mm.matcher.plan_table(proposal, {})
    holds, client = mm.matcher.holds, mm.app.store.client
    commit, newer = holds.commit, []

    def stalled(game_id: str, proposal_id: str, seats: Any, lease: str) -> bool:
        if newer:  # the newer claim's own pin
            return commit(game_id, proposal_id, seats, lease)
        client.delete(hold_key(a), hold_key(b))  # the stalled matcher's leases run out
        client.set(hold_key(b), Hold("lease", GAME, "elsewhere", "1").encode())  # B tried at another table
        clock.advance(mm.matcher.tuning.claim_retry_ms / 1000 + 1)
        mm.matcher._recover(DUEL, clock())  # another replica's retry gives the table up
        assert mm.app.store.get(ta).state == "searching"  # type: ignore[union-attr]
        client.delete(hold_key(b))  # that other table let B go
        again = _propose(mm, DUEL, [ta, tb])
        assert again.proposal_id == proposal_id
        newer.append(mm.matcher.plan_table(again, {}))
        assert mm.matcher._claim(again, newer[0], {r.ticket_id: r for r in mm.app.store.queued(DUEL)}, clock())
        return False  # the stalled matcher wakes to find its leases gone

    monkeypatch.setattr(holds, "commit", stalled)
    assert not mm.matcher._claim(proposal, plan, live, clock())
    assert {mm.app.store.get(t).state for t in (ta, tb)} == {"claimed"}  # type: ignore[union-attr]
    assert mm.app.store.plan(DUEL, proposal.proposal_id) == newer[0]
    assert {Hold.parse(client.get(hold_key(p))).kind for p in (a, b)} == {"table"}  # type: ignore[union-attr,arg-type]
    due = int(client.zscore(Keys(DUEL).claims, proposal.proposal_id))  # type: ignore[arg-type]  # as its claim wrote it
    assert mm.matcher._create(DUEL, proposal.proposal_id, newer[0], due) == 1
    made = {mm.app.store.get(t).match_id for t in (ta, tb)}  # type: ignore[union-attr]
    assert len(made) == 1 and made != {""}
    assert mm.app.store.client.get(Keys(DUEL).open(a)) is None  # matched: free to queue again


def test_a_late_failed_release_keeps_the_pointer_of_a_ticket_another_table_claimed(mm: Matchmaking) -> None:
    """release.lua deleted every pointer naming a ticket of the call, even one it did not release:
    A's ticket, claimed by another table since, lost its pointer and A could open a second ticket
    in the game while the first was about to be seated."""
    a, b, c = _guests(mm, "ABC")
    ta = mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    tb = mm.app.create_ticket(b, DUEL, [], {}).ticket_id
    old, old_plan = _claim(mm, DUEL, [ta, tb])
    assert mm.app.store.release(DUEL, old.proposal_id, _tickets(old_plan), requeue=True, reason="x",
                                now_ms=mm.app.clock(), claim=old_plan["claim"]) == 2
    tc = mm.app.create_ticket(c, DUEL, [], {}).ticket_id
    _claim(mm, DUEL, [ta, tc])
    assert mm.app.store.release(DUEL, old.proposal_id, _tickets(old_plan), requeue=False, reason="late",
                                now_ms=mm.app.clock(), claim=old_plan["claim"]) == 0
    assert mm.app.store.client.get(Keys(DUEL).open(a)) == ta
    assert mm.app.store.client.get(Keys(DUEL).open(b)) == tb
    with pytest.raises(AlreadyExists):
        mm.app.create_ticket(a, DUEL, [], {})


def test_a_late_finalize_keeps_the_pointers_of_tickets_it_did_not_match(mm: Matchmaking) -> None:
    """finalize.lua deleted every pointer naming a ticket of the call, even one it did not mark
    matched: B's requeued ticket (and A's, claimed by another table) lost its pointer."""
    a, b, c = _guests(mm, "ABC")
    ta = mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    tb = mm.app.create_ticket(b, DUEL, [], {}).ticket_id
    old, old_plan = _claim(mm, DUEL, [ta, tb])
    mm.app.store.release(DUEL, old.proposal_id, _tickets(old_plan), requeue=True, reason="x", now_ms=mm.app.clock(),
                         claim=old_plan["claim"])
    tc = mm.app.create_ticket(c, DUEL, [], {}).ticket_id
    _claim(mm, DUEL, [ta, tc])
    assert _finalize(mm, old_plan) == 0
    assert mm.app.store.client.get(Keys(DUEL).open(a)) == ta
    assert mm.app.store.client.get(Keys(DUEL).open(b)) == tb
    with pytest.raises(AlreadyExists):
        mm.app.create_ticket(b, DUEL, [], {})


# -- claim tokens: a stale replica finishes, counts and retries only its own claim -------------
def _claimed_again(mm: Matchmaking) -> tuple[str, dict[str, Any], dict[str, Any], list[str]]:
    """A table given up and its tickets claimed again: the same proposal id, another token."""
    a, b = _guests(mm, "AB")
    ta = mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    tb = mm.app.create_ticket(b, DUEL, [], {}).ticket_id
    old, old_plan = _claim(mm, DUEL, [ta, tb])
    assert mm.app.store.release(DUEL, old.proposal_id, _tickets(old_plan), requeue=True, reason="hold lost",
                                now_ms=mm.app.clock(), claim=old_plan["claim"]) == 2
    new, new_plan = _claim(mm, DUEL, [ta, tb])
    assert new.proposal_id == old.proposal_id and new_plan["claim"] != old_plan["claim"]
    return old.proposal_id, old_plan, new_plan, [ta, tb]


def test_a_stale_finalize_leaves_the_same_tables_newer_claim_alone(mm: Matchmaking) -> None:
    """finalize.lua was keyed by the proposal id only: the first claim's matcher, answered late,
    marked the newer claim's tickets matched with its own answer and deleted that claim's proposal
    and claims entry under its matcher (whose own CreateMatch, under its own plan, was still out)."""
    pid, old_plan, new_plan, ticket_ids = _claimed_again(mm)
    store = mm.app.store
    assert _finalize(mm, old_plan, "m-stale") == 0
    for t in ticket_ids:
        record = store.get(t)
        assert record is not None and (record.state, record.claim, record.match_id) == ("claimed", new_plan["claim"], "")
    assert store.plan(DUEL, pid) == new_plan
    assert store.client.zscore(Keys(DUEL).claims, pid) is not None
    assert _finalize(mm, new_plan, "m-new") == 2  # its own matcher finishes it
    assert {store.get(t).match_id for t in ticket_ids} == {"m-new"}  # type: ignore[union-attr]
    assert store.client.exists(Keys(DUEL).proposal(pid), Keys(DUEL).claims) == 0


def test_a_stale_failed_attempt_neither_counts_nor_moves_the_newer_claims_retry(mm: Matchmaking) -> None:
    """retry_later.lua was keyed by the proposal id only: the first claim's failed CreateMatch
    counted an attempt of the newer claim (its retries slowed down sooner) and moved its retry."""
    pid, old_plan, new_plan, _ = _claimed_again(mm)
    store, claims = mm.app.store, Keys(DUEL).claims
    due = store.client.zscore(claims, pid)
    later = mm.app.clock() + 60_000
    assert store.retry_later(DUEL, pid, later, claim=old_plan["claim"], slow_after=1, delay_ms=1) == 0
    assert store.client.hget(Keys(DUEL).proposal(pid), "attempts") == "0"
    assert store.client.zscore(claims, pid) == due
    assert store.retry_later(DUEL, pid, later, claim=new_plan["claim"]) == 1  # its own matcher's attempt
    assert store.client.zscore(claims, pid) == later


def test_a_stale_replica_does_not_take_the_newer_claims_retry(mm: Matchmaking) -> None:
    """take_retry.lua was keyed by the proposal id only: a replica holding the first claim's plan
    took the newer claim's retry and asked CreateMatch with the old plan."""
    pid, old_plan, new_plan, _ = _claimed_again(mm)
    store, claims = mm.app.store, Keys(DUEL).claims
    due = store.client.zscore(claims, pid)
    assert due is not None
    assert not store.take_retry(DUEL, pid, int(due), int(due) + 10, claim=old_plan["claim"])
    assert store.client.zscore(claims, pid) == due
    assert store.take_retry(DUEL, pid, int(due), int(due) + 10, claim=new_plan["claim"])


def test_a_replica_with_a_plan_read_before_the_table_was_claimed_again_leaves_it_to_that_claim(
        mm: Matchmaking, clock: FakeClock, creator: RecordingCreator, monkeypatch: pytest.MonkeyPatch) -> None:
    """A replica read a stale claim's plan and stalled; meanwhile the table was given up, its tickets
    claimed again (the same proposal id) and that claim's CreateMatch failed once. Waking, the
    replica took the newer claim's retry and asked CreateMatch with the old plan (its request id
    another one after a secret rotation), then finished the newer claim with that answer."""
    a, b = _guests(mm, "AB")
    ta = mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    tb = mm.app.create_ticket(b, DUEL, [], {}).ticket_id
    old, old_plan = _claim(mm, DUEL, [ta, tb])
    old_plan["request_id"] = "before-the-rotation-" + old_plan["request_id"]
    mm.app.store.release(DUEL, old.proposal_id, _tickets(old_plan), requeue=True, reason="hold lost",
                         now_ms=clock(), claim=old_plan["claim"])
    creator.fail_next = 1
    assert mm.matcher.tick(DUEL) == 0  # claimed again; its CreateMatch got no answer
    store, pid = mm.app.store, old.proposal_id
    new_plan = store.plan(DUEL, pid)
    assert new_plan is not None and new_plan["claim"] != old_plan["claim"] and creator.calls == 1
    clock.advance(mm.matcher.tuning.claim_retry_ms / 1000 + 1)
    with monkeypatch.context() as stalled:
        stalled.setattr(store, "plan", lambda game_id, proposal_id: old_plan)  # read before it all
        assert mm.matcher._recover(DUEL, clock()) == 0
    assert creator.calls == 1
    assert store.plan(DUEL, pid) == new_plan
    assert mm.matcher._recover(DUEL, clock()) == 1  # the newer claim's own retry, with its plan
    made = {store.get(t).match_id for t in (ta, tb)}  # type: ignore[union-attr]
    assert made == {"m-" + new_plan["request_id"].replace(":", "-")} and list(creator.tables) == list(made)


def _answered_late(mm: Matchmaking, creator: RecordingCreator, monkeypatch: pytest.MonkeyPatch,
                   ) -> tuple[str, str, str, str, list[dict[str, Any]]]:
    """Two guests and their tickets, whose next CreateMatch finds its claim given up meanwhile and
    the same tickets claimed again (by a matcher that dies at once): its answer comes late. The
    newer claim's plan is in the list once the matcher has called."""
    a, b = _guests(mm, "AB")
    ta = mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    tb = mm.app.create_ticket(b, DUEL, [], {}).ticket_id
    store, create, newer = mm.app.store, creator.create_match, []

    def slow(*args: Any, **kwargs: Any) -> Any:
        if not newer:
            [pid] = [str(p) for p in store.client.zrange(Keys(DUEL).claims, 0, -1)]
            first = store.plan(DUEL, pid)
            assert first is not None
            store.release(DUEL, pid, _tickets(first), requeue=True, reason="hold lost", now_ms=mm.app.clock(),
                          claim=first["claim"])
            newer.append(_claim(mm, DUEL, [ta, tb])[1])
        return create(*args, **kwargs)

    monkeypatch.setattr(creator, "create_match", slow)
    return a, b, ta, tb, newer


def test_a_late_answer_for_a_claim_given_up_leaves_the_newer_claim_its_holds(
        mm: Matchmaking, creator: RecordingCreator, monkeypatch: pytest.MonkeyPatch) -> None:
    """While a matcher's CreateMatch was out, its claim was given up and the same tickets claimed
    again (the same `table` holds). Its finalize, refused now, must not free those holds either:
    nothing would keep the newer table's players from another table while it is created."""
    a, b, ta, tb, newer = _answered_late(mm, creator, monkeypatch)
    store = mm.app.store
    assert mm.matcher.tick(DUEL) == 0
    for t in (ta, tb):
        record = store.get(t)
        assert record is not None and (record.state, record.claim) == ("claimed", newer[0]["claim"])
    holds = {mm.matcher.holds.get(p) for p in (a, b)}
    assert {(h.kind, h.ref) for h in holds if h is not None} == {("table", newer[0]["proposal_id"])} and None not in holds
    due = int(store.client.zscore(Keys(DUEL).claims, newer[0]["proposal_id"]))  # type: ignore[arg-type]
    assert mm.matcher._create(DUEL, newer[0]["proposal_id"], newer[0], due) == 1
    assert {store.get(t).state for t in (ta, tb)} == {"matched"}  # type: ignore[union-attr]


@pytest.mark.parametrize("newer_ends", ["retried", "refused"])
def test_the_holds_a_late_answer_left_to_the_newer_claim_go_with_that_claim(
        mm: Matchmaking, clock: FakeClock, creator: RecordingCreator, monkeypatch: pytest.MonkeyPatch,
        newer_ends: str) -> None:
    """The holds a refused finalize leaves pinned are the newer claim's (the same `table` values):
    should its matcher die, its claim retry seats them; should its CreateMatch be refused, it frees
    them. Either way nobody stays pinned to a table that will not be finished."""
    create = creator.create_match
    a, b, ta, tb, newer = _answered_late(mm, creator, monkeypatch)
    store = mm.app.store
    assert mm.matcher.tick(DUEL) == 0  # the late answer: left to the newer claim
    monkeypatch.setattr(creator, "create_match", create)
    if newer_ends == "refused":
        creator.fail_next, creator.permanent = 1, True
    clock.advance(mm.matcher.tuning.claim_retry_ms / 1000 + 1)
    assert mm.matcher.tick(DUEL) == (1 if newer_ends == "retried" else 0)  # the newer claim's retry
    holds = [mm.matcher.holds.get(p) for p in (a, b)]
    states = {store.get(t).state for t in (ta, tb)}  # type: ignore[union-attr]
    if newer_ends == "retried":
        assert states == {"matched"} and {h.kind for h in holds if h is not None} == {"seated"} and None not in holds
    else:
        assert states == {"failed"} and holds == [None, None]
        again = [mm.app.create_ticket(p, DUEL, [], {}).ticket_id for p in (a, b)]
        assert mm.matcher.tick(DUEL) == 1 and {store.get(t).state for t in again} == {"matched"}  # type: ignore[union-attr]
    assert store.client.zcard(Keys(DUEL).claims) == 0


def test_a_claim_from_before_the_tokens_is_still_retried_counted_and_finished(
        mm: Matchmaking, clock: FakeClock, creator: RecordingCreator) -> None:
    """A claim written before the tokens carries none, on its plan, proposal or tickets: the token
    '' is its own, as release.lua has it (else a table claimed before an upgrade, its CreateMatch
    without an answer, was never retried nor finished, its players pinned for the claim's day)."""
    a, b = _guests(mm, "AB")
    ta = mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    tb = mm.app.create_ticket(b, DUEL, [], {}).ticket_id
    creator.fail_next = 1
    assert mm.matcher.tick(DUEL) == 0  # claimed, no answer
    store, k = mm.app.store, Keys(DUEL)
    [pid] = [str(p) for p in store.client.zrange(k.claims, 0, -1)]
    plan = store.plan(DUEL, pid)
    assert plan is not None
    del plan["claim"]
    store.client.hset(k.proposal(pid), "plan", json.dumps(plan))
    store.client.hdel(k.proposal(pid), "claim")
    store.client.hdel(k.ticket(ta), "claim")
    store.client.hdel(k.ticket(tb), "claim")
    creator.fail_next = 1
    clock.advance(mm.matcher.tuning.claim_retry_ms / 1000 + 1)
    assert mm.matcher.tick(DUEL) == 0  # retried, no answer again: counted
    assert store.client.hget(k.proposal(pid), "attempts") == "2"
    clock.advance(mm.matcher.tuning.claim_retry_ms / 1000 + 1)
    assert mm.matcher.tick(DUEL) == 1
    assert {store.get(t).state for t in (ta, tb)} == {"matched"}  # type: ignore[union-attr]
    assert store.client.exists(k.proposal(pid), k.claims) == 0
