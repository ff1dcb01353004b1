"""A rematch over real gRPC and a real redis-server: the asks on Redis (`RedisRematchAsks`), the
SDK's ask_rematch/get_rematch/rematch_seat, the last two asks at once, and the rematch played.
The use cases' rules one by one: tests/unit/command/test_rematch.py."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
import redis

from famiglia.auth import TokenSigner
from famiglia.bots.toy import toy_registry
from famiglia.client import GameClient
from famiglia.client.game_client import SeatClient
from famiglia.config import Settings
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.eventstore.rematch_asks import (
    REMATCH_TTL_S,
    FinishedMatchArchived,
    RedisRematchAsks,
    RematchAsksStore,
    creation_pending,
)
from famiglia.grpcutil.errors import error_code
from famiglia.v1 import envelope_pb2
from famiglia.v1 import game_service_pb2 as game_pb
from services.command.app import CommandApp
from services.command.bootstrap import CommandSettings, bootstrap
from services.command.entrypoints.grpc_server import serve
from tests.contracts.eventstore_contract import batch
from tests.contracts.rematch_asks_contract import RematchAsksContract

pytestmark = pytest.mark.redis

SECRET = "rematches"
SIGNER = TokenSigner(SECRET)


@dataclass
class Service:
    client: GameClient
    store: RedisEventStore
    app: CommandApp


@pytest.fixture()
def service(redis_url: str) -> Iterator[Service]:
    store = RedisEventStore.connect(redis_url)
    app = bootstrap(store=store, registry=toy_registry(), settings=Settings(redis_url=redis_url, secret=SECRET),
                    command_settings=CommandSettings(leave_policy="random"))
    server, port = serve(app, "127.0.0.1:0", workers=8)
    server.start()
    client = GameClient(f"127.0.0.1:{port}")
    yield Service(client, store, app)
    client.close()
    server.stop(grace=None)
    store.close()


def _match(service: Service, seats: int = 3) -> list[SeatClient]:
    info = [envelope_pb2.SeatInfo(seat=s, player_id=f"p{s}") for s in range(seats)]
    handle = service.client.create_match("highcard", seats, seed=3, options={"hand": "3"}, seat_info=info,
                                         token=SIGNER.operator_token("tests"))
    return [service.client.seat(handle.match_id, t) for t in handle.seat_tokens]


def _play_out(players: list[SeatClient]) -> None:
    for _ in range(100):
        view = players[0].client.spectator(players[0].match_id).view()
        if view.finished:
            return
        seat = players[view.to_act[0].seat]
        legal = seat.legal_commands()
        seat.submit(legal.commands[0], command_id=f"c{legal.version}", expected_version=legal.version)
    raise AssertionError("the match did not end")


def _refusal(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as raised:
        call()
    return raised.value.code(), error_code(raised.value)


def test_the_asks_on_redis(redis_url: str) -> None:
    store = RedisEventStore.connect(redis_url)
    asks = RedisRematchAsks(store.client, store.keys)
    try:
        assert asks.look("m1").seats == frozenset()
        assert asks.ask("m1", 2).seats == {2} and asks.ask("m1", 0).seats == {0, 2}
        assert asks.ask("m1", 0).seats == {0, 2}
        assert asks.fix_request_id("m1", "first") == "first"
        assert asks.fix_request_id("m1", "second") == "first"
        assert asks.look("m1").request_id == "first" and asks.look("m2").seats == frozenset()
        key = store.keys.rematch("m1")
        assert key.endswith(":rematch:m1") and store.keys.tag(store.keys.partition_of("m1")) in key
        raw = redis.Redis.from_url(redis_url)
        assert 0 < raw.pttl(key) <= REMATCH_TTL_S * 1000
        # Pending from the fixing until the creation is done, in the match's partition's slot.
        asks.fix_request_id("m2", "other", at_ms=2_000)
        assert asks.pending(1_999) == [] and asks.pending(2_000) == ["m2"]  # "m1" fixed now
        assert sorted(asks.pending(10**15)) == ["m1", "m2"] and len(asks.pending(10**15, most=1)) == 1
        assert creation_pending(store.client, store.keys, "m2")
        pending = store.keys.rematches_pending(store.keys.partition_of("m2"))
        assert store.keys.tag(store.keys.partition_of("m2")) in pending and raw.zscore(pending, "m2") == 2_000
        asks.drop_pending("m2")
        assert asks.pending(10**15) == ["m1"] and not creation_pending(store.client, store.keys, "m2")
        asks.put_off("m2", 5_000)  # no longer pending: nothing
        assert not creation_pending(store.client, store.keys, "m2")
        raw.close()
    finally:
        store.close()


def test_the_ask_that_completes_the_table_fixes_the_request_id_in_its_own_write(redis_url: str) -> None:
    """A process killed between the last ask and the request id left a table asked in full with
    nothing pending, which no sweep made: the script writes all three at once."""
    store = RedisEventStore.connect(redis_url)
    asks = RedisRematchAsks(store.client, store.keys)
    try:
        first = asks.ask("m1", 0, (0, 2), "first", at_ms=1_000)
        assert (first.seats, first.request_id, first.fresh) == ({0}, "", True) and asks.pending(10**15) == []
        done = asks.ask("m1", 2, (0, 2), "second", at_ms=2_000)
        assert (done.seats, done.request_id, done.fresh) == ({0, 2}, "second", True)
        assert asks.pending(1_999) == [] and asks.pending(2_000) == ["m1"]
        again = asks.ask("m1", 2, (0, 2), "third", at_ms=3_000)
        assert (again.request_id, again.fresh) == ("second", False) and asks.pending(2_000) == ["m1"]
        raw = redis.Redis.from_url(redis_url)
        assert 0 < raw.pttl(store.keys.rematch("m1")) <= REMATCH_TTL_S * 1000
        raw.close()
    finally:
        store.close()


def test_the_ask_script_refuses_a_match_trimmed_and_writes_nothing(redis_url: str) -> None:
    """The ask's script looks at the match's stream in the write that would mark its creation
    pending: a match trimmed since the caller loaded it (archived: its stream gone, its version
    kept) is refused, nothing written, not even the seat's ask."""
    store = RedisEventStore.connect(redis_url)
    asks = RedisRematchAsks(store.client, store.keys)
    try:
        store.append("m1", 0, batch("m1", 0, 3))
        assert asks.ask("m1", 0, (0, 1), "first", at_ms=1_000).seats == {0}
        store.trim("m1")
        with pytest.raises(FinishedMatchArchived):
            asks.ask("m1", 1, (0, 1), "first", at_ms=1_000)
        assert asks.look("m1").seats == {0} and asks.look("m1").request_id == ""
        assert asks.pending(10**15) == [] and not creation_pending(store.client, store.keys, "m1")
        store.append("m2", 0, batch("m2", 0, 1))
        store.trim("m2")
        with pytest.raises(FinishedMatchArchived):  # a first ask too
            asks.ask("m2", 0, (0, 1), "second")
        assert not store.client.exists(store.keys.rematch("m2"))
    finally:
        store.close()


class TestRedisRematchAsks(RematchAsksContract):
    @pytest.fixture(autouse=True)
    def _redis(self, redis_url: str) -> None:
        self.url = redis_url

    def make(self) -> tuple[Any, RematchAsksStore]:
        store = RedisEventStore.connect(self.url)
        return store, RedisRematchAsks(store.client, store.keys)


def test_no_write_leaves_a_key_of_a_match_trimmed(redis_url: str) -> None:
    """`fix_request_id` and `allow` wrote the asks of a match trimmed since its caller loaded it
    (the ask's script alone looked): a hash, and a pending entry, of a match gone."""
    store = RedisEventStore.connect(redis_url)
    asks = RedisRematchAsks(store.client, store.keys)
    try:
        store.append("m1", 0, batch("m1", 0, 1))
        store.trim("m1")
        for write in (lambda: asks.fix_request_id("m1", "first"), lambda: asks.allow("m1", "ops"),
                      lambda: asks.ask("m1", 0)):
            with pytest.raises(FinishedMatchArchived):
                write()
        assert not store.client.exists(store.keys.rematch("m1"))
        assert store.client.zscore(store.keys.rematches_pending(store.keys.partition_of("m1")), "m1") is None
    finally:
        store.close()


def test_the_oldest_pending_creations_of_every_partition_come_first(redis_url: str) -> None:
    """They came partition by partition: the first partitions' `most` hid an older one in a later
    partition, and the sweep's creations put off (behind the others) came first again."""
    store = RedisEventStore.connect(redis_url)
    asks = RedisRematchAsks(store.client, store.keys)
    try:
        ids = [f"m{i}" for i in range(40)]
        low = min(ids, key=store.keys.partition_of)
        high = max(ids, key=store.keys.partition_of)
        assert store.keys.partition_of(low) < store.keys.partition_of(high)
        asks.fix_request_id(low, "low", at_ms=2_000)
        asks.fix_request_id(high, "high", at_ms=1_000)
        assert asks.pending(10**15, most=1) == [high]
        asks.put_off(high, 3_000)
        assert asks.pending(10**15) == [low, high] and asks.pending(2_999) == [low]
    finally:
        store.close()


def test_a_table_asks_for_a_rematch_and_plays_it(service: Service) -> None:
    players = _match(service)
    assert _refusal(players[0].ask_rematch) == (grpc.StatusCode.FAILED_PRECONDITION, "match_not_over")
    _play_out(players)
    first = players[2].ask_rematch()
    assert (list(first.asked), list(first.waiting_for), first.match_id, first.seat) == ([2], [0, 1], "", 0)
    assert players[2].rematch_seat(first) is None
    # The other two are told, on their notification streams (WatchMyTurns), whose ask it was not,
    # after being told the match is over (the command service tells it first, under the told mark
    # the dispatcher's own notice of it then finds).
    watched = list(service.client.stub.WatchMyTurns(
        game_pb.WatchMyTurnsRequest(after_id="0-0", until_now=True), metadata=(("authorization", f"Bearer {SIGNER.player_token('p0')}"),),
        timeout=30))
    told = [r.notification for r in watched if r.HasField("notification")]
    assert [(n.kind, n.match_id, n.seat) for n in told] == [("match_over", players[0].match_id, 0),
                                                           ("rematch_asked", players[0].match_id, 0)]
    assert [n.kind for n in service.app.notices.read("p2")] == []
    watcher = service.client.spectator(players[0].match_id)
    looked = watcher.get_rematch()
    assert (list(looked.asked), list(looked.waiting_for), looked.seat_token) == ([2], [0, 1], "")
    assert _refusal(watcher.ask_rematch) == (grpc.StatusCode.UNAUTHENTICATED, "no_token")

    # The last two ask at once (the one whose ask came first may be told it waits for the
    # other), and ask again: one rematch for both.
    with ThreadPoolExecutor(2) as pool:
        at_once = list(pool.map(lambda seat: seat.ask_rematch(), players[:2]))
    assert {a.match_id for a in at_once} - {""}
    answers = [seat.ask_rematch() for seat in players[:2]]
    assert answers[0].match_id and answers[0].match_id == answers[1].match_id
    assert {a.match_id for a in at_once} - {""} == {answers[0].match_id}
    assert [a.seat for a in answers] == [1, 2]
    made = players[2].ask_rematch()
    assert (made.match_id, made.seat, list(made.waiting_for)) == (answers[0].match_id, 0, [])

    # Each seat's handle there, by its new seat: seat s sat at s + 1.
    handles = {a.seat: p.rematch_seat(a) for p, a in zip(players, [*answers, made], strict=True)}
    rematch = [handles[s] for s in range(3)]
    assert all(h is not None and h.match_id == made.match_id for h in rematch)
    _play_out(rematch)  # type: ignore[arg-type]
    assert rematch[0].view().finished  # type: ignore[union-attr]
    assert [m.match_id for m in service.client.my_turns(SIGNER.player_token("p0"))] == []


def _replica(redis_url: str) -> CommandApp:
    """Another command service on the same Redis, with its own connection and hot matches."""
    return bootstrap(store=RedisEventStore.connect(redis_url), registry=toy_registry(),
                     settings=Settings(redis_url=redis_url, secret=SECRET),
                     command_settings=CommandSettings(leave_policy="random"))


def test_last_asks_on_two_replicas_at_once_make_one_rematch_found_once_the_match_is_trimmed(
        service: Service, redis_url: str) -> None:
    """Two replicas, each its own Redis connection, take the table's last two asks at once: one
    rematch. The finished match's stream trimmed (the retention sweep), a third replica still
    finds the rematch and each seat's place there: the asks outlive the trim."""
    players = _match(service, seats=2)
    _play_out(players)
    match_id = players[0].match_id
    a, b = _replica(redis_url), _replica(redis_url)
    try:
        viewers = [a.viewer(match_id, p.token) for p in players]
        with ThreadPoolExecutor(2) as pool:
            at_once = list(pool.map(lambda app_seat: app_seat[0].ask_rematch(match_id, viewers[app_seat[1]]),
                                    [(a, 0), (b, 1)]))
        made = {r.match_id for r in at_once} - {""}
        assert len(made) == 1
        rematch_id = made.pop()
        service.store.trim(match_id)
        c = _replica(redis_url)
        try:
            for seat in (0, 1):
                found = c.get_rematch(match_id, viewers[seat])
                assert (found.match_id, found.seat, found.waiting_for) == (rematch_id, (seat + 1) % 2, ())
                assert SIGNER.read_seat(found.seat_token).match_id == rematch_id
        finally:
            c.close()
    finally:
        a.close()
        b.close()


def test_a_lost_creation_is_made_by_the_sweep_on_redis(service: Service) -> None:
    """The last asker's process died between fixing the request id and creating the rematch:
    the sweep (`finish_rematches`, each command process every 30 s) makes it, the table is
    told, and nothing is left pending."""
    players = _match(service, seats=2)
    _play_out(players)
    match_id = players[0].match_id
    players[0].ask_rematch()
    asks = RedisRematchAsks(service.store.client, service.store.keys)
    asks.ask(match_id, 1)
    asks.fix_request_id(match_id, "a-request-id-nobody-guesses-0123456789abcdef")
    assert service.app.finish_rematches(grace_s=0) == 1
    made = players[1].get_rematch()
    assert made.match_id and list(made.waiting_for) == [] and made.seat == 0
    assert [n.kind for n in service.app.notices.read("p0")][-1] == "rematch_made"
    assert asks.pending(10**15) == [] and service.app.finish_rematches(grace_s=0) == 0


def test_an_operators_token_on_askrematch_allows_it_and_asks_for_no_seat(service: Service) -> None:
    """It was refused UNAUTHENTICATED bad_token (not a seat token), so the `operator_only`
    refusal of a match whose bots think past the public budget had no way out."""
    players = _match(service, seats=2)
    match_id = players[0].match_id

    def ask(token: str) -> game_pb.RematchResponse:
        return service.client.stub.AskRematch(game_pb.RematchRequest(match_id=match_id),
                                              metadata=(("authorization", f"Bearer {token}"),), timeout=10)

    operator = SIGNER.operator_token("alice")
    assert _refusal(lambda: ask(operator)) == (grpc.StatusCode.FAILED_PRECONDITION, "match_not_over")
    _play_out(players)
    allowed = service.client.allow_rematch(match_id, token=operator)  # the SDK's way
    assert (list(allowed.asked), list(allowed.waiting_for), allowed.seat, allowed.seat_token) == ([], [0, 1], -1, "")
    assert service.app.rematches.look(match_id).allowed_by == "alice"
    assert _refusal(lambda: ask(SIGNER.player_token("p0"))) == (grpc.StatusCode.UNAUTHENTICATED, "bad_token")
    expired = SIGNER.operator_token("alice", ttl_s=1, now=1.0)
    assert _refusal(lambda: ask(expired)) == (grpc.StatusCode.UNAUTHENTICATED, "bad_token")


def test_a_last_ask_of_a_match_trimmed_since_it_was_loaded_is_archived_and_marks_nothing_pending(
        service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    """AskRematch loads the finished match, then its script asks. The retention trimming the
    match in between, the last ask still marked the creation pending, on a match that was gone;
    its asker's process dying before the creation, the sweep had nothing to make the rematch
    from (`rematch_lost`). The script refuses the trimmed match: the ask is answered as one after
    the trim (`NOT_FOUND match_archived`), and nothing is written or left pending."""
    players = _match(service, seats=2)
    _play_out(players)
    match_id = players[0].match_id
    players[0].ask_rematch()
    loaded = service.app._finished

    def then_the_retention_trims(finished_id: str, viewer):  # type: ignore[no-untyped-def]
        m = loaded(finished_id, viewer)
        service.store.trim(finished_id)  # nothing pending yet: the trim's own look lets it go
        return m

    def the_asker_dies(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("the asker's process died before the creation")

    with monkeypatch.context() as patched:
        patched.setattr(service.app, "_finished", then_the_retention_trims)
        patched.setattr(service.app, "create_match", the_asker_dies)
        assert _refusal(players[1].ask_rematch) == (grpc.StatusCode.NOT_FOUND, "match_archived")
    asks = RedisRematchAsks(service.store.client, service.store.keys)
    assert asks.look(match_id).seats == {0} and asks.look(match_id).request_id == ""
    assert not creation_pending(service.store.client, service.store.keys, match_id)
    assert service.app.finish_rematches(grace_s=0) == 0  # nothing to lose
    assert _refusal(players[1].ask_rematch) == (grpc.StatusCode.NOT_FOUND, "match_archived")  # as after it
