"""Party consent on real Redis: a party ticket waits for every invitee to accept, fails when
one declines, expires when one does not answer, and never seats anyone who did not agree."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from famiglia.grpcutil.errors import AlreadyExists, FailedPrecondition, NotFound, PermissionDenied
from famiglia.matchmaking import MatchPolicy
from services.matchmaking.bootstrap import Matchmaking
from services.matchmaking.store import Keys, TicketRecord

from .conftest import GAME, FakeClock, RecordingCreator, make_mm
from .conftest import guests as _guests

DUEL = "duel"


@pytest.fixture()
def party_mm(redis_url: str, creator: RecordingCreator, clock: FakeClock) -> Iterator[Matchmaking]:
    mm = make_mm(redis_url, creator, clock=clock,
                 policy=MatchPolicy(backfill_after=None, invite_ttl=60, ticket_ttl=600))
    yield mm
    mm.close()


def test_a_party_ticket_queues_only_when_every_invitee_has_accepted(party_mm: Matchmaking, clock: FakeClock,
                                                                    creator: RecordingCreator) -> None:
    a, b, c, d = _guests(party_mm, "ABCD")
    created = party_mm.app.create_ticket(a, GAME, [4], {}, party=[b, c])
    ticket = created.ticket_id
    assert created.status.state == "pending" and created.status.awaiting == (b, c)
    assert created.status.answer_within_s == 60.0
    party_mm.app.create_ticket(d, GAME, [4], {})
    assert party_mm.app.store.queue_size(GAME) == 1  # only D's

    [invite] = party_mm.app.invites(b)  # the invitee sees it, with who asked and who else is asked
    assert (invite.ticket_id, invite.party, invite.awaiting) == (ticket, (a, b, c), (b, c))
    assert party_mm.app.ticket(c, ticket).state == "pending"  # and may read or watch it by id

    clock.advance(10)
    status = party_mm.app.accept_invite(b, ticket)
    assert (status.state, status.awaiting) == ("pending", (c,))
    assert party_mm.app.accept_invite(b, ticket).awaiting == (c,)  # accepting twice is fine
    assert party_mm.app.invites(b) == [] and [i.ticket_id for i in party_mm.app.invites(c)] == [ticket]
    assert party_mm.matcher.run_once() == 0 and not creator.tables  # D + a pending party is no table

    clock.advance(10)
    status = party_mm.app.accept_invite(c, ticket)
    assert status.state == "searching" and status.awaiting == () and status.waited_s == 0.0  # waits from now
    assert party_mm.app.invites(c) == []
    record = party_mm.app.store.get(ticket)
    assert record is not None and record.asked_ms == record.created_ms - 20_000  # the wish is older than the wait
    assert party_mm.matcher.run_once() == 1
    for p in (a, b, c):
        assert party_mm.app.ticket(p, ticket).state == "matched"
    [table] = creator.tables.values()
    assert sorted(i.player_id for i in table.seat_info) == sorted([a, b, c, d])


def test_a_declined_invite_fails_the_ticket_for_the_whole_party(party_mm: Matchmaking) -> None:
    a, b, c = _guests(party_mm, "ABC")
    ticket = party_mm.app.create_ticket(a, GAME, [], {}, party=[b, c]).ticket_id
    party_mm.app.accept_invite(b, ticket)
    status = party_mm.app.decline_invite(c, ticket)
    assert status.state == "failed" and status.reason == f"{c} declined the party invite"
    assert party_mm.app.decline_invite(c, ticket).state == "failed"  # declining twice is fine
    assert party_mm.app.ticket(a, ticket).reason == status.reason
    with pytest.raises(FailedPrecondition) as late:
        party_mm.app.accept_invite(b, ticket)
    assert late.value.code == "ticket_failed"
    for p in (a, b, c):  # nobody is left holding the failed ticket
        party_mm.app.create_ticket(p, GAME, [], {})
    assert party_mm.app.invites(c) == []


def test_an_unanswered_invite_expires_the_ticket(party_mm: Matchmaking, clock: FakeClock) -> None:
    a, b = _guests(party_mm, "AB")
    ticket = party_mm.app.create_ticket(a, DUEL, [], {}, party=[b]).ticket_id
    clock.advance(59.9)
    party_mm.matcher.run_once()
    assert party_mm.app.ticket(b, ticket).state == "pending"
    clock.advance(0.1)
    with pytest.raises(FailedPrecondition) as late:  # too late even before the matcher passes
        party_mm.app.accept_invite(b, ticket)
    assert late.value.code == "ticket_expired"
    party_mm.matcher.run_once()
    status = party_mm.app.ticket(a, ticket)
    assert status.state == "expired" and "not answered" in status.reason
    assert party_mm.app.invites(b) == []
    party_mm.app.create_ticket(a, DUEL, [], {})  # the creator is free again


def test_only_invitees_answer_and_only_while_the_ticket_waits(party_mm: Matchmaking) -> None:
    a, b, stranger = _guests(party_mm, "ABS")
    ticket = party_mm.app.create_ticket(a, DUEL, [], {}, party=[b]).ticket_id
    with pytest.raises(PermissionDenied) as own:
        party_mm.app.accept_invite(a, ticket)
    assert own.value.code == "not_invited"
    with pytest.raises(PermissionDenied) as other:
        party_mm.app.decline_invite(stranger, ticket)
    assert other.value.code == "not_your_ticket"
    assert party_mm.app.accept_invite(b, ticket).state == "searching"
    with pytest.raises(FailedPrecondition) as answered:
        party_mm.app.decline_invite(b, ticket)
    assert answered.value.code == "invite_answered"
    assert party_mm.app.cancel(b, ticket).state == "cancelled"  # a member leaves by cancelling


def _after_the_read(mm: Matchmaking, monkeypatch: pytest.MonkeyPatch, meanwhile: Callable[[], None]) -> None:
    """The next ticket read answers what Redis held, then `meanwhile` happens: another call's
    script (or the key's retention ending) between this call's read and its own script."""
    read = mm.app.store.get

    def get(ticket_id: str) -> TicketRecord | None:
        record = read(ticket_id)
        monkeypatch.setattr(mm.app.store, "get", read)
        meanwhile()
        return record

    monkeypatch.setattr(mm.app.store, "get", get)


def test_a_decline_racing_the_last_accept_across_the_deadline_is_invite_answered(
        party_mm: Matchmaking, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """The decline read the ticket pending, the invitee's accept queued it just before the
    deadline, and the decline's clock was past it: `ticket_searching`, a code no table names,
    where a decline after every accept is `invite_answered`."""
    a, b = _guests(party_mm, "AB")
    ticket = party_mm.app.create_ticket(a, DUEL, [], {}, party=[b]).ticket_id
    clock.advance(59.9)

    def accepted_in_time() -> None:
        assert party_mm.app.accept_invite(b, ticket).state == "searching"
        clock.advance(0.2)

    _after_the_read(party_mm, monkeypatch, accepted_in_time)
    with pytest.raises(FailedPrecondition) as late:
        party_mm.app.decline_invite(b, ticket)
    assert late.value.code == "invite_answered"
    assert party_mm.app.ticket(a, ticket).state == "searching"


@pytest.mark.parametrize("call", ["cancel", "decline_invite"])
def test_a_ticket_dropped_between_the_read_and_the_script_is_unknown_ticket(
        party_mm: Matchmaking, monkeypatch: pytest.MonkeyPatch, call: str) -> None:
    """An ended ticket's record is dropped after its retention: a call that read it just before
    got `ticket_missing` (a code no table names) where an accept gets `unknown_ticket`."""
    a, b = _guests(party_mm, "AB")
    ticket = party_mm.app.create_ticket(a, DUEL, [], {}, party=[b]).ticket_id
    _after_the_read(party_mm, monkeypatch, lambda: party_mm.app.store.client.delete(Keys(DUEL).ticket(ticket)))
    with pytest.raises(NotFound) as gone:
        getattr(party_mm.app, call)(b, ticket)
    assert gone.value.code == "unknown_ticket"


def test_a_pending_ticket_holds_its_creators_place_and_can_be_cancelled(party_mm: Matchmaking) -> None:
    a, b = _guests(party_mm, "AB")
    ticket = party_mm.app.create_ticket(a, GAME, [], {}, party=[b]).ticket_id
    with pytest.raises(AlreadyExists):
        party_mm.app.create_ticket(a, GAME, [], {})
    assert party_mm.app.cancel(a, ticket).state == "cancelled"
    assert party_mm.app.invites(b) == []
    with pytest.raises(FailedPrecondition) as gone:
        party_mm.app.accept_invite(b, ticket)
    assert gone.value.code == "ticket_cancelled"
    party_mm.app.create_ticket(a, GAME, [], {})


def test_invites_are_listed_across_games_or_for_one(party_mm: Matchmaking, clock: FakeClock) -> None:
    a, b, c = _guests(party_mm, "ABC")
    first = party_mm.app.create_ticket(a, GAME, [], {}, party=[c]).ticket_id
    clock.advance(1)
    second = party_mm.app.create_ticket(b, DUEL, [], {}, party=[c]).ticket_id
    assert [i.ticket_id for i in party_mm.app.invites(c)] == [first, second]
    assert [i.ticket_id for i in party_mm.app.invites(c, DUEL)] == [second]
    assert party_mm.app.invites(a) == []


def test_being_seated_elsewhere_ends_the_creators_pending_party(party_mm: Matchmaking, clock: FakeClock) -> None:
    a, b, c = _guests(party_mm, "ABC")
    party = party_mm.app.create_ticket(a, GAME, [], {}, party=[b]).ticket_id
    duel = party_mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    party_mm.app.create_ticket(c, DUEL, [], {})
    clock.advance(0.001)
    assert party_mm.matcher.run_once() == 1  # A sits in the duel
    match_id = party_mm.app.ticket(a, duel).match_id
    status = party_mm.app.ticket(b, party)
    assert status.state == "cancelled" and status.reason == f"matched in {DUEL}: {a} was seated there"
    assert match_id and match_id not in status.reason and status.match_id == ""  # B may not spectate A's table
    assert party_mm.app.invites(b) == []


def test_an_invitee_seated_elsewhere_before_accepting_keeps_the_party(party_mm: Matchmaking, clock: FakeClock) -> None:
    """An invitee's wish to play starts when they accept (docs/matchmaking.md, parties): a
    table they sat at before that is no reason to cancel the party's ticket."""
    a, b, x, y = _guests(party_mm, "ABXY")
    party = party_mm.app.create_ticket(a, GAME, [3], {}, party=[b]).ticket_id
    clock.advance(5)
    party_mm.app.create_ticket(b, DUEL, [2], {})
    party_mm.app.create_ticket(x, DUEL, [2], {})
    assert party_mm.matcher.run_once() == 1  # B sits in a duel
    clock.advance(5)
    assert party_mm.app.accept_invite(b, party).state == "searching"
    party_mm.app.create_ticket(y, GAME, [3], {})
    clock.advance(1)
    assert party_mm.matcher.run_once() == 1
    assert {party_mm.app.ticket(p, party).state for p in (a, b)} == {"matched"}
