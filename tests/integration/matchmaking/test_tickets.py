"""Tickets on real Redis: creation, idempotency, one open ticket per player per game, cancelling."""

from __future__ import annotations

import pytest

from famiglia.grpcutil.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
)
from services.matchmaking.bootstrap import Matchmaking

from .conftest import GAME, RecordingCreator


def _guest(mm: Matchmaking, name: str = "Vito") -> str:
    player, _ = mm.app.register_guest(name)
    return player.player_id


def test_a_guest_gets_a_player_token_that_names_it(mm: Matchmaking) -> None:
    player, token = mm.app.register_guest("  Vito  ")
    assert mm.app.authenticate(token) == player.player_id
    assert mm.app.profile(player.player_id).player.display_name == "Vito"


def test_a_retried_registration_gets_the_same_player(mm: Matchmaking) -> None:
    first, _ = mm.app.register_guest("Vito", request_id="r1-0123456789abcdef")
    again, _ = mm.app.register_guest("Vito", request_id="r1-0123456789abcdef")
    assert first.player_id == again.player_id


def test_a_request_id_naming_a_player_gone_names_the_guest_it_registers_next(mm: Matchmaking) -> None:
    """Its key kept (or expired between its two reads) while its player is gone: the guest made
    then is the one a retry gets, not a third."""
    mm.app.players.client.set(mm.app.players.guest_key("r2-0123456789abcdef"), "g-gone")
    first, _ = mm.app.register_guest("Vito", request_id="r2-0123456789abcdef")
    again, _ = mm.app.register_guest("Vito", request_id="r2-0123456789abcdef")
    assert first.player_id == again.player_id != "g-gone"


def test_a_registration_request_id_anybody_could_guess_is_refused(mm: Matchmaking) -> None:
    """Sent again, a registration's request id answers with the guest's token: one as short as
    "r1" would hand a stranger who guessed it the guest."""
    for guessable in ("r1", "x" * 15):
        with pytest.raises(InvalidArgument) as exc:
            mm.app.register_guest("Vito", request_id=guessable)
        assert exc.value.code == "bad_request_id" and "secret" in exc.value.message
    assert mm.app.register_guest("Vito", request_id="x" * 16)[0].display_name == "Vito"


@pytest.mark.parametrize("name", ["", "   ", "x" * 33, "bad\nname"])
def test_display_names_are_checked(mm: Matchmaking, name: str) -> None:
    with pytest.raises(InvalidArgument):
        mm.app.register_guest(name)


@pytest.mark.parametrize("name", ["\u3164", "\u2800\u2800", "\uffa0 \u115f", "\u0301", "\U0001d159"])
def test_a_display_name_that_shows_nothing_is_refused(mm: Matchmaking, name: str) -> None:
    """The Hangul fillers, the Braille blank and a lone combining mark are printable by their
    categories, so a guest named by them alone was registered, and sat at tables and on the
    leaderboard as a blank: the fillers match chat refuses for looking empty."""
    with pytest.raises(InvalidArgument) as exc:
        mm.app.register_guest(name)
    assert exc.value.code == "bad_display_name"


@pytest.mark.parametrize("name", ["\u1100\u1160", "Vito \u3164", "\u2800\u2801"])
def test_a_display_name_with_fillers_beside_what_shows_is_kept(mm: Matchmaking, name: str) -> None:
    assert mm.app.register_guest(name)[0].display_name == name


def test_profiles_carry_the_default_rating_per_game(mm: Matchmaking) -> None:
    profile = mm.app.profile(_guest(mm))
    assert profile.ratings[GAME].mu == 25.0
    assert abs(profile.ratings[GAME].sigma - 25 / 3) < 1e-9


def test_a_ticket_is_created_once_per_request_id(mm: Matchmaking) -> None:
    p = _guest(mm)
    first = mm.app.create_ticket(p, GAME, [3, 4], {}, request_id="req-1")
    again = mm.app.create_ticket(p, GAME, [3, 4], {}, request_id="req-1")
    assert again.ticket_id == first.ticket_id and again.duplicate and not first.duplicate
    assert first.status.state == "searching" and first.status.seat_counts == (3, 4)
    assert mm.app.store.queue_size(GAME) == 1


def test_one_open_ticket_per_player_per_game(mm: Matchmaking) -> None:
    p = _guest(mm)
    mm.app.create_ticket(p, GAME, [], {})
    with pytest.raises(AlreadyExists):
        mm.app.create_ticket(p, GAME, [], {})
    mm.app.create_ticket(p, "duel", [], {})  # another game is another queue


def test_an_invitee_with_an_open_ticket_must_end_it_before_accepting(mm: Matchmaking) -> None:
    """An invite does not take the invitee's one open ticket per game until they accept it."""
    a, b = _guest(mm, "A"), _guest(mm, "B")
    own = mm.app.create_ticket(b, GAME, [], {}).ticket_id
    party = mm.app.create_ticket(a, GAME, [], {}, party=[b]).ticket_id
    assert mm.app.ticket(b, party).state == "pending"
    with pytest.raises(AlreadyExists) as busy:
        mm.app.accept_invite(b, party)
    assert busy.value.code == "ticket_open"
    assert mm.app.ticket(b, party).awaiting == (b,)
    assert mm.app.store.queue_size(GAME) == 1  # only b's own ticket
    mm.app.cancel(b, own)
    assert mm.app.accept_invite(b, party).state == "searching"
    assert mm.app.store.queue_size(GAME) == 1  # now only the party's
    with pytest.raises(AlreadyExists):  # and the accepted invite is b's open ticket
        mm.app.create_ticket(b, GAME, [], {})


def test_requests_no_table_can_satisfy_are_refused(mm: Matchmaking) -> None:
    p = _guest(mm)
    with pytest.raises(InvalidArgument):
        mm.app.create_ticket(p, GAME, [9], {})
    with pytest.raises(InvalidArgument):
        mm.app.create_ticket(p, GAME, [], {"speed": "fast"})
    with pytest.raises(InvalidArgument):
        mm.app.create_ticket(p, "chess", [], {})
    with pytest.raises(NotFound):
        mm.app.create_ticket(p, GAME, [], {}, party=["g-nobody"])


def test_only_the_tickets_players_may_read_or_cancel_it(mm: Matchmaking) -> None:
    p, other = _guest(mm), _guest(mm)
    ticket = mm.app.create_ticket(p, GAME, [], {}).ticket_id
    with pytest.raises(PermissionDenied):
        mm.app.ticket(other, ticket)
    with pytest.raises(PermissionDenied):
        mm.app.cancel(other, ticket)


def test_cancelling_frees_the_player_to_queue_again(mm: Matchmaking) -> None:
    p = _guest(mm)
    ticket = mm.app.create_ticket(p, GAME, [], {}).ticket_id
    assert mm.app.cancel(p, ticket).state == "cancelled"
    assert mm.app.cancel(p, ticket).state == "cancelled"  # again: fine
    assert mm.app.store.queue_size(GAME) == 0
    mm.app.create_ticket(p, GAME, [], {})


def test_a_matched_ticket_cannot_be_cancelled(mm: Matchmaking, creator: RecordingCreator) -> None:
    a, b = _guest(mm), _guest(mm)
    ta = mm.app.create_ticket(a, "duel", [], {}).ticket_id
    mm.app.create_ticket(b, "duel", [], {})
    assert mm.matcher.run_once() == 1
    with pytest.raises(FailedPrecondition):
        mm.app.cancel(a, ta)
    status = mm.app.ticket(a, ta)
    assert status.state == "matched" and status.match_id in creator.tables


def test_tickets_expire_after_their_lifetime(redis_url: str, creator: RecordingCreator) -> None:
    from famiglia.matchmaking import MatchPolicy

    from .conftest import FakeClock, make_mm

    clock = FakeClock()
    mm = make_mm(redis_url, creator, policy=MatchPolicy(backfill_after=None, ticket_ttl=600), clock=clock)
    p = _guest(mm)
    ticket = mm.app.create_ticket(p, GAME, [], {}).ticket_id
    clock.advance(599)
    mm.matcher.run_once()
    assert mm.app.ticket(p, ticket).state == "searching"
    clock.advance(1)
    mm.matcher.run_once()
    status = mm.app.ticket(p, ticket)
    assert (status.state, status.waited_s) == ("expired", 600.0)
    mm.app.create_ticket(p, GAME, [], {})  # the player is free again
    mm.close()


def test_cancel_after_claim_is_refused_and_claim_after_cancel_fails(mm: Matchmaking) -> None:
    """Both orders of the race, made explicit: whichever script runs first wins, atomically."""
    from famiglia.matchmaking import form_matches

    a, b, c, d = (_guest(mm, n) for n in "ABCD")
    ta = mm.app.create_ticket(a, "duel", [], {}).ticket_id
    mm.app.create_ticket(b, "duel", [], {})
    [first] = form_matches([r.to_ticket() for r in mm.app.store.queued("duel")], mm.app.clock(), mm.matcher.policy)
    assert mm.app.store.claim(first, mm.matcher.plan_table(first, {}), mm.app.clock())
    with pytest.raises(FailedPrecondition):
        mm.app.cancel(a, ta)

    tc = mm.app.create_ticket(c, "duel", [], {}).ticket_id
    mm.app.create_ticket(d, "duel", [], {})
    [second] = form_matches([r.to_ticket() for r in mm.app.store.queued("duel")], mm.app.clock(),
                            mm.matcher.policy)
    mm.app.cancel(c, tc)
    assert not mm.app.store.claim(second, mm.matcher.plan_table(second, {}), mm.app.clock())
    assert [r.players for r in mm.app.store.queued("duel")] == [(d,)]  # the other ticket is untouched


def test_an_unknown_bot_policy_is_refused_at_start_up(redis_url: str, creator: RecordingCreator) -> None:
    from famiglia.matchmaking import MatchPolicy

    from .conftest import make_mm

    pytest.importorskip("famiglia.bots.policy")
    with pytest.raises(ValueError, match="no bot policy"):
        make_mm(redis_url, creator, policy=MatchPolicy(bot_policy="clairvoyant"))
