"""Faults found by probing the running service: a claim retried after its player was seated
elsewhere, ticket ids that name keys other than tickets, and a hold that cannot be taken."""

from __future__ import annotations

from collections import Counter

import pytest

from famiglia.grpcutil.errors import FailedPrecondition, InvalidArgument, NotFound
from famiglia.matchmaking import MatchPolicy
from services.matchmaking.holds import Hold, hold_key
from services.matchmaking.matcher import MatcherTuning
from services.matchmaking.settings import MatchmakingSettings

from .conftest import GAME, FakeClock, RecordingCreator, make_mm
from .test_holds import DUEL, Crash, _crash_before, _two_games
from .test_seated_players_and_late_failures import _guest_after


def test_a_claim_retried_after_its_player_sat_elsewhere_and_let_go_is_given_up(
        redis_url: str, creator: RecordingCreator) -> None:
    """A matcher dies between claiming A's duel table and pinning the holds; A's lease runs out
    and A sits in the parlour. A's next wish takes A's hold and gives it back (a partner is
    busy), so A has no hold at all when the duel claim is retried: the retry must still see that
    A was seated after asking for the duel (`mm:seated`), not take the empty hold and seat A twice."""
    clock = FakeClock()
    crashed = make_mm(redis_url, creator, clock=clock, tuning=MatcherTuning(claim_retry_ms=5000))
    a, duel, parlour, _ = _two_games(crashed, clock)
    crashed.matcher.holds.commit = _crash_before(crashed.matcher.holds.commit)  # type: ignore[method-assign]
    with pytest.raises(Crash):
        crashed.matcher.tick(DUEL)  # the duel is claimed, A and B only leased
    client = crashed.app.store.client
    client.delete(hold_key(a))  # the dead matcher's lease on A runs out
    clock.advance(1)

    other = make_mm(redis_url, creator, clock=clock, tuning=MatcherTuning(claim_retry_ms=5000))
    assert other.matcher.tick(GAME) == 1  # A sits in the parlour with C
    assert other.app.ticket(a, parlour).state == "matched"

    clock.advance(1)  # A wants another parlour table: a new wish; D, A's partner, is busy elsewhere
    other.app.create_ticket(a, GAME, [2], {})
    d = _guest_after(other, a, "D")
    other.app.create_ticket(d, GAME, [2], {})
    client.set(hold_key(d), Hold("lease", DUEL, "p-elsewhere", "x").encode(), px=60_000)
    assert other.matcher.tick(GAME) == 0  # A's hold: seated -> lease -> given back (deleted)
    assert other.matcher.holds.get(a) is None

    clock.advance(5)
    assert other.matcher.tick(DUEL) == 0, "the duel table retried A, who sat in the parlour since asking"
    assert Counter(creator.seated_players())[a] == 1
    status = other.app.ticket(a, duel)
    assert status.state == "cancelled" and status.reason.startswith(f"matched in {GAME}")
    for m in (crashed, other):
        m.close()


def test_a_ticket_id_naming_another_key_is_an_unknown_ticket(redis_url: str, creator: RecordingCreator) -> None:
    """A ticket id's game part is the text before its last dot, so a made-up id can name any key
    of the form `{mm:<x>}:ticket:<id>`, a request id's key among them: that read used to fail
    with WRONGTYPE (INTERNAL). Only ids of the games served are tickets."""
    mm = make_mm(redis_url, creator)
    a = mm.app.register_guest("A")[0].player_id
    forged = f"{DUEL}}}:req:{a}:x.y"
    mm.app.create_ticket(a, DUEL, [], {}, request_id=f"x}}:ticket:{forged}")
    assert mm.app.store.client.type("{mm:" + forged.rpartition(".")[0] + "}:ticket:" + forged) == "string"
    for call in (mm.app.ticket, mm.app.cancel, mm.app.accept_invite, mm.app.decline_invite):
        with pytest.raises(NotFound) as refused:
            call(a, forged)
        assert refused.value.code == "unknown_ticket"
    with pytest.raises(NotFound):
        next(mm.app.watch(a, forged))
    mm.close()


@pytest.mark.parametrize("hold", ["0", "0.0004"])
def test_a_hold_too_short_to_take_is_refused_at_start_up(hold: str) -> None:
    """FAMIGLIA_MM_HOLD became whole milliseconds for `SET PX`, which refuses 0: the matcher then
    failed every tick and matched nobody, silently but for its logs (now: 1 to 3600 seconds)."""
    with pytest.raises(SystemExit, match="FAMIGLIA_MM_HOLD"):
        MatchmakingSettings.from_env({"FAMIGLIA_MM_HOLD": hold})


def test_a_decline_after_the_deadline_is_too_late_like_an_accept(redis_url: str, creator: RecordingCreator) -> None:
    """An invite past its answer deadline was not answered in time, whether or not the matcher has
    passed yet: accepting it is refused with `ticket_expired`, and declining it used to succeed,
    ending the party as `failed` (`"<invitee> declined"`) instead of `expired`."""
    clock = FakeClock()
    mm = make_mm(redis_url, creator, clock=clock, policy=MatchPolicy(backfill_after=None, invite_ttl=60))
    a, b = (mm.app.register_guest(n)[0].player_id for n in "AB")
    ticket = mm.app.create_ticket(a, DUEL, [], {}, party=[b]).ticket_id
    clock.advance(60)
    with pytest.raises(FailedPrecondition) as late:
        mm.app.decline_invite(b, ticket)
    assert late.value.code == "ticket_expired"
    status = mm.app.ticket(a, ticket)
    assert status.state == "expired" and "not answered" in status.reason
    mm.app.create_ticket(a, DUEL, [], {})  # the creator is free again
    mm.close()


def test_a_party_bigger_than_any_table_is_refused_before_its_members_are_looked_up(
        redis_url: str, creator: RecordingCreator) -> None:
    """A request may name a party of a hundred thousand made-up ids: each was looked up in Redis
    (about a second of work per call) only to answer `unknown_player`; no table seats it anyway."""
    mm = make_mm(redis_url, creator)
    a = mm.app.register_guest("A")[0].player_id
    looked_up: list[int] = []
    missing = mm.app.players.missing
    mm.app.players.missing = lambda ids, **kw: looked_up.append(len(list(ids))) or missing(ids, **kw)  # type: ignore[method-assign]
    with pytest.raises(InvalidArgument) as refused:
        mm.app.create_ticket(a, DUEL, [], {}, party=[f"g{i:016x}" for i in range(10_000)])
    assert refused.value.code == "party_too_big" and looked_up == []
    with pytest.raises(NotFound) as unknown:  # a party that fits a table is still checked member by member
        mm.app.create_ticket(a, DUEL, [], {}, party=["g-nobody"])
    assert unknown.value.code == "unknown_player" and looked_up == [2]
    mm.close()
