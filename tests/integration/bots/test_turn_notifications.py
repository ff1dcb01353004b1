"""Turn notifications on a real Redis, written by the running dispatcher (its consumer loop, as
`python -m services.bots` runs it): a match of two named people played through the command
service tells each person in its own stream, in the player's own slot, exactly the asks its
seat's GetView shows; a restarted dispatcher, and a second one reading every stream from its
start, write nothing again."""

from __future__ import annotations

import contextlib
import random
import threading
import time

from famiglia.bots.toy import toy_registry
from famiglia.config import Settings
from famiglia.eventstore.consumer import PartitionConsumer
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.eventstore.turn_notices import MATCH_OVER, YOUR_TURN, RedisTurnNotices, TurnNotice, notify_key
from famiglia.v1 import envelope_pb2
from services.bots.dispatcher import GROUP, Dispatcher
from services.command.app import Viewer
from services.command.bootstrap import bootstrap as command_bootstrap
from tests.support.tasks import NoTasks

ANN, BOB = "ann", "bob"


@contextlib.contextmanager
def running(store: RedisEventStore, notices: RedisTurnNotices, group: str = GROUP, start_id: str = "$"):
    dispatcher = Dispatcher(store, toy_registry(), NoTasks(), notices=notices)
    consumer = PartitionConsumer.for_store(store, group, "d")
    consumer.ensure_groups(start_id=start_id)
    stop = threading.Event()
    thread = threading.Thread(target=dispatcher.run, args=(consumer, stop), kwargs={"block_ms": 50}, daemon=True)
    thread.start()
    try:
        yield dispatcher, consumer
    finally:
        stop.set()
        thread.join(10)


def settle(consumer: PartitionConsumer) -> None:
    """Until the dispatcher has read every entry and acked it (a bounded wait): its notices are
    written with its batch, before the ack."""
    client = consumer.client
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        behind = False
        for key in consumer._key_of.values():
            if not client.exists(key):
                continue
            last = client.xinfo_stream(key)["last-generated-id"]
            ours = [g for g in client.xinfo_groups(key) if g["name"] in (consumer.group, consumer.group.encode())]
            behind = behind or not ours or ours[0]["last-delivered-id"] != last
        if not behind and consumer.pending_count() == 0:
            return
        time.sleep(0.02)
    raise AssertionError("the dispatcher did not catch up in 30 s")


def test_two_people_are_told_their_turns_once_across_a_restart_and_a_second_dispatcher(redis_url: str) -> None:
    store = RedisEventStore.connect(redis_url)
    notices = RedisTurnNotices(store.client, store.keys.prefix)
    command = command_bootstrap(store=store, registry=toy_registry(), settings=Settings(redis_url=redis_url,
                                                                                         secret="s"))
    people = {0: ANN, 1: BOB}
    info = [envelope_pb2.SeatInfo(seat=s, player_id=p) for s, p in people.items()]
    asks: dict[str, set[int]] = {ANN: set(), BOB: set()}
    with running(store, notices) as (_dispatcher, consumer):
        match_id = command.create_match("highcard", 2, seed=5, options={"hand": "3", "clock_s": "30"},
                                        seat_info=info).match_id
        rng = random.Random(5)
        for i in range(40):
            hot = command.matches.get(match_id).match
            if hot.finished:
                break
            for seat, player in people.items():
                if any(p.seat == seat for p in command.get_view(match_id, Viewer(seat)).to_act):
                    asks[player].add(hot.version)
            seat = hot.engine.pending(hot.state)[0].seat
            settle(consumer)  # people take their time: the dispatcher reads each command alone
            command.submit(match_id, Viewer(seat), f"c{i}", rng.choice(hot.engine.legal_commands(hot.state, seat)))
        assert command.matches.get(match_id).match.finished
        settle(consumer)
    told = {p: notices.read(p) for p in (ANN, BOB)}
    for player, seat in ((ANN, 0), (BOB, 1)):
        turns = [n for n in told[player] if n.kind == YOUR_TURN]
        assert {n.version for n in turns} == asks[player], "each ask told, at the version it began"
        assert all(n.seat == seat and n.match_id == match_id and n.game_id == "highcard" for n in told[player])
        assert all(n.deadline_ms > 0 for n in turns), "a seat with a clock is told its deadline"
        assert [n.kind for n in told[player]][-1] == MATCH_OVER
        assert store.client.ttl(notify_key(store.keys.prefix, player)) > 0
    assert notify_key(store.keys.prefix, ANN).count("{pl:") == 1  # the player's own slot

    restarted = Dispatcher(store, toy_registry(), NoTasks(), notices=notices)
    restarted.recover()  # as a restarted one begins: the recent and the live matches folded again
    with running(store, notices, group="another", start_id="0") as (_second, consumer):  # every entry again
        settle(consumer)
    assert {p: notices.read(p) for p in (ANN, BOB)} == told
    store.close()


def _script_checks(client) -> int:
    stats = client.info("commandstats")
    return int(stats.get("cmdstat_script|exists", {}).get("calls", 0))


def test_a_batch_of_notices_is_one_round_trip_and_survives_a_script_flush(redis_url: str) -> None:
    """The batch's scripts go in its pipeline as EVALSHA: redis-py's Script asked SCRIPT EXISTS
    first, a second round trip every batch. A Redis that lost its scripts (a restart) is sent
    the script and the batch again, and nothing is written twice."""
    store = RedisEventStore.connect(redis_url)
    notices = RedisTurnNotices(store.client, store.keys.prefix)

    def ask(at: int, player: str = ANN) -> TurnNotice:
        return TurnNotice(player, "m1", "highcard", 0, YOUR_TURN, at, asked_at=at)

    checks = _script_checks(store.client)
    assert notices.tell([ask(3), ask(3, BOB)]) == 2
    assert notices.tell([ask(5), ask(3, BOB)]) == 1
    assert _script_checks(store.client) == checks
    store.client.script_flush()
    assert notices.tell([ask(5), ask(7, BOB)]) == 1
    assert [n.version for n in notices.read(ANN)] == [3, 5] and [n.version for n in notices.read(BOB)] == [3, 7]
    store.close()
