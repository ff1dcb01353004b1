"""Guests that nobody uses any more go: each `mm:player:*` record carries a TTL
(FAMIGLIA_MM_GUEST_TTL_DAYS) that every use refreshes in the round trip that reads or writes
it, and a player token whose guest is gone is refused with a clear code, never a crash.
Until then every guest ever registered stayed in Redis for good. Real redis-server; expiry is
a record dropped (what Redis does at the TTL), never a wait."""

from __future__ import annotations

import grpc
import pytest

from famiglia.grpcutil.errors import NotFound, Unauthenticated, error_code
from famiglia.v1 import matchmaking_service_pb2 as pb
from famiglia.v1 import matchmaking_service_pb2_grpc as pb_grpc
from services.matchmaking.entrypoints.grpc_server import serve
from services.matchmaking.players import GUEST_TTL_S

from .conftest import SECRET, RecordingCreator, guests, make_mm

DUEL = "duel"
SHORT = 86_400  # what the refreshes are told apart from: a TTL lowered to a day


def _key(player_id: str) -> str:
    return "mm:player:{" + player_id + "}"


def _ttl(mm, player_id: str) -> int:  # type: ignore[no-untyped-def]
    return int(mm.app.store.client.ttl(_key(player_id)))


def _lower(mm, *player_ids: str) -> None:  # type: ignore[no-untyped-def]
    for p in player_ids:
        mm.app.store.client.expire(_key(p), SHORT)


def _refreshed(mm, player_id: str) -> bool:  # type: ignore[no-untyped-def]
    return SHORT < _ttl(mm, player_id) <= GUEST_TTL_S


def test_a_guest_is_registered_with_its_ttl(redis_url: str, creator: RecordingCreator) -> None:
    mm = make_mm(redis_url, creator)
    (a,) = guests(mm, "A")
    assert _refreshed(mm, a)
    mm.close()


def test_every_use_refreshes_the_ttl_and_a_look_by_others_does_not(redis_url: str, creator: RecordingCreator) -> None:
    mm = make_mm(redis_url, creator)
    a, b, c = guests(mm, "ABC")
    _lower(mm, a, b, c)
    mm.app.profile(b)  # anyone's profile (GetProfile { player_id }): a look, not b's use
    assert _ttl(mm, b) <= SHORT
    mm.app.profile(a, own=True)  # GetProfile with a's token
    assert _refreshed(mm, a)
    mm.app.create_ticket(b, DUEL, [], {}, party=[c])  # the creator and the party it names
    assert _refreshed(mm, b) and _refreshed(mm, c)
    mm.close()


def test_a_table_made_with_guests_refreshes_their_ttls(redis_url: str, creator: RecordingCreator) -> None:
    mm = make_mm(redis_url, creator)
    a, b = guests(mm, "AB")
    mm.app.create_ticket(a, DUEL, [], {})
    mm.app.create_ticket(b, DUEL, [], {})
    _lower(mm, a, b)
    assert mm.matcher.run_once() == 1
    assert _refreshed(mm, a) and _refreshed(mm, b)
    mm.close()


def test_a_record_from_before_ttls_gets_one_at_its_next_use(redis_url: str, creator: RecordingCreator) -> None:
    mm = make_mm(redis_url, creator)
    (a,) = guests(mm, "A")
    mm.app.store.client.persist(_key(a))  # as every guest was written until now
    assert _ttl(mm, a) == -1
    mm.app.create_ticket(a, DUEL, [], {})
    assert _refreshed(mm, a)
    mm.close()


def test_off_keeps_guests_for_good_and_a_use_lifts_an_earlier_ttl(redis_url: str, creator: RecordingCreator) -> None:
    mm = make_mm(redis_url, creator, guest_ttl_s=None)
    a, b = guests(mm, "AB")
    assert _ttl(mm, a) == -1
    _lower(mm, b)  # set while the TTLs were on
    mm.app.profile(b, own=True)
    assert _ttl(mm, b) == -1
    mm.close()


def test_a_token_of_an_expired_guest_is_refused_player_expired(redis_url: str, creator: RecordingCreator) -> None:
    mm = make_mm(redis_url, creator)
    a, b = guests(mm, "AB")
    mm.app.store.client.delete(_key(a))  # its TTL ran out
    for call in (lambda: mm.app.profile(a, own=True), lambda: mm.app.create_ticket(a, DUEL, [], {})):
        with pytest.raises(Unauthenticated) as refused:
            call()
        assert refused.value.code == "player_expired"
    with pytest.raises(NotFound) as unknown:  # someone else's look, and a party member: gone
        mm.app.profile(a)
    assert unknown.value.code == "unknown_player"
    with pytest.raises(NotFound) as unknown:
        mm.app.create_ticket(b, DUEL, [], {}, party=[a])
    assert unknown.value.code == "unknown_player"
    assert mm.app.players.get(a) is None and mm.app.store.client.exists(_key(a)) == 0  # a check writes nothing
    mm.close()


def test_a_ticket_in_flight_outlives_its_guests_record(redis_url: str, creator: RecordingCreator) -> None:
    """Tickets, invites, holds and seat tokens carry the player id: a record gone meanwhile (only
    a guest unused for the TTL less the ticket's life can) leaves the table to be made, its seat
    named by the id."""
    mm = make_mm(redis_url, creator)
    a, c = guests(mm, "AC")
    invite = mm.app.create_ticket(c, DUEL, [], {}, party=[a]).ticket_id
    mm.app.store.client.delete(_key(a))
    assert mm.app.invites(a)[0].ticket_id == invite
    mm.app.accept_invite(a, invite)
    assert mm.matcher.run_once() == 1
    (table,) = creator.tables.values()
    assert sorted(i.display_name for i in table.seat_info) == sorted([a, "C"])
    status = mm.app.ticket(a, invite)
    assert status.state == "matched" and status.seat_token
    mm.close()


def test_get_profile_over_grpc_tells_an_expired_guest_from_an_unknown_player(
        redis_url: str, creator: RecordingCreator) -> None:
    from famiglia.auth import TokenSigner

    mm = make_mm(redis_url, creator)
    (a,) = guests(mm, "A")
    mm.app.store.client.delete(_key(a))
    server, port = serve(mm.app, "127.0.0.1:0", workers=4)
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        players = pb_grpc.PlayerServiceStub(channel)
        token = [("authorization", f"Bearer {TokenSigner(SECRET).player_token(a)}")]
        with pytest.raises(grpc.RpcError) as own:
            players.GetProfile(pb.GetProfileRequest(), metadata=token, timeout=10)
        assert (own.value.code(), error_code(own.value)) == (grpc.StatusCode.UNAUTHENTICATED, "player_expired")
        with pytest.raises(grpc.RpcError) as look:
            players.GetProfile(pb.GetProfileRequest(player_id=a), timeout=10)
        assert (look.value.code(), error_code(look.value)) == (grpc.StatusCode.NOT_FOUND, "unknown_player")
        fresh = players.RegisterGuest(pb.RegisterGuestRequest(display_name="A again"), timeout=10)
        again = [("authorization", f"Bearer {fresh.player_token}")]
        assert players.GetProfile(pb.GetProfileRequest(), metadata=again, timeout=10).display_name == "A again"
    finally:
        channel.close()
        server.stop(grace=None)
        mm.close()
