"""The bots' processes across a Redis restart (a crash, a failover): the dispatcher in
process, a real `celery worker` process, the command service over gRPC, all on a
redis-server of the test's own that it kills and starts again on the same port and AOF
(`appendfsync always`: nothing acknowledged is lost, so whatever stops is the processes')."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from famiglia.localstack.redis_server import RedisServer

from .conftest import BotsStack
from .test_celery_bots import seats

pytestmark = [pytest.mark.redis, pytest.mark.xdist_group("bots")]


@pytest.fixture()
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(data_dir=tmp_path / "redis", appendfsync="always").start()
    yield server
    server.stop()


@pytest.fixture()
def restarted_stack(own_redis: RedisServer, tmp_path: Path) -> Iterator[BotsStack]:
    stack = BotsStack(own_redis.url, tmp_path)
    yield stack
    stack.close()


def test_a_worker_with_a_task_in_hand_outlives_a_redis_restart(restarted_stack: BotsStack,
                                                               own_redis: RedisServer) -> None:
    """Redis killed while the worker plays a decision: kombu's channel, closed on the lost
    connection, tried to give the task back and built a client from a transport already let
    go (`'NoneType' object has no attribute 'hostname'`); Celery called that unrecoverable and
    the worker exited, so no bot played again until someone restarted it. The worker stays,
    reconnects, and the match is played to its end, every card once."""
    stack = restarted_stack
    slow = "ismcts?iterations=100000&seconds=0.4"  # a task in hand most of the time
    handle = stack.create_match("highcard", 2, seed=5, options={"hand": "6"}, seat_info=seats(slow, slow))
    stack.wait_going(handle.match_id, handle.version + 2)
    time.sleep(0.2)  # most likely in the middle of a decision now
    own_redis.restart(kill=True)
    view = stack.wait_finished(handle.match_id, timeout=90)
    assert stack.worker is not None and stack.worker.poll() is None, \
        (stack.tmp / "worker.log").read_text()[-3000:]
    assert view.version == handle.version + 12  # every card played exactly once
