"""The bots' broker across a Redis failover, on real redis-servers (tests.support.failover):
kombu's Redis transport took the demoted node's replies (the BRPOP it cut short with
UNBLOCKED, then READONLY to every write) for reply errors, which Celery calls unrecoverable:
the worker exited and no task was taken again until someone restarted it. The broker's
connections now take a demoted node for a lost connection (services.bots.entrypoints.broker)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from kombu import Connection

from famiglia.localstack.redis_server import RedisServer
from services.bots.entrypoints.broker import TRANSPORT
from tests.support.failover import (
    SwitchingProxy,
    coordinated_failover,
    fail_over_by_hand,
    primary_and_replica,
)

from .conftest import BotsStack
from .test_celery_bots import seats

pytestmark = [pytest.mark.redis, pytest.mark.xdist_group("bots")]


@pytest.fixture()
def servers(tmp_path: Path) -> Iterator[tuple[RedisServer, RedisServer]]:
    with primary_and_replica(tmp_path) as pair:
        yield pair


@pytest.fixture()
def address(servers: tuple[RedisServer, RedisServer]) -> Iterator[SwitchingProxy]:
    """The services' Redis address, on the primary until the test fails over."""
    proxy = SwitchingProxy(servers[0].port)
    yield proxy
    proxy.close()


def test_a_worker_plays_on_after_a_failover(servers: tuple[RedisServer, RedisServer], address: SwitchingProxy,
                                            tmp_path: Path) -> None:
    """The whole stack on the address, Redis's own FAILOVER in the middle of a match (nothing
    acknowledged lost): the worker reconnects, the match is played to its end, every card once."""
    stack = BotsStack(address.url, tmp_path)
    try:
        slow = "ismcts?iterations=100000&seconds=0.2"
        handle = stack.create_match("highcard", 2, seed=5, options={"hand": "6"}, seat_info=seats(slow, slow))
        stack.wait_going(handle.match_id, handle.version + 2)
        coordinated_failover(*servers, address)
        view = stack.wait_finished(handle.match_id, timeout=90)
        assert stack.worker is not None and stack.worker.poll() is None, \
            (stack.tmp / "worker.log").read_text()[-3000:]
        assert view.version == handle.version + 12  # every card played exactly once
        assert "network:NodeDemoted" in (stack.tmp / "worker.log").read_text()  # reconnected as after a loss
    finally:
        stack.close()


def test_unacked_bookkeeping_refused_by_a_demoted_node_is_written_on_the_primary(
        servers: tuple[RedisServer, RedisServer], address: SwitchingProxy) -> None:
    """A worker's unacked records (taken, acked) go on a connection it keeps: on the demoted node
    each was refused READONLY and logged, for good (an ack lost: its task run again after the
    visibility timeout). It is sent again on a new connection, to the primary."""
    primary, replica = servers
    connection = Connection(address.url, transport=TRANSPORT)
    channel = connection.channel()
    try:
        channel.bookkeep((("HSET", "famiglia:probe", "before", "1"),))
        channel.settle()
        fail_over_by_hand(primary, replica)
        address.upstream = replica.port
        channel.bookkeep((("HSET", "famiglia:probe", "after", "2"),))
        channel.settle()
        on_primary = redis.Redis(port=replica.port)
        assert on_primary.hgetall("famiglia:probe") == {b"before": b"1", b"after": b"2"}
        on_primary.close()
    finally:
        channel.close()
        connection.release()
