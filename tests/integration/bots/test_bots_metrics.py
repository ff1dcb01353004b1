"""The bots service's metrics on a real Redis: decide tasks queued by policy, and the
dispatcher's backlog per partition read from its consumer group."""

from __future__ import annotations

import pytest
import redis

from famiglia.config import Settings
from famiglia.eventstore.consumer import PartitionConsumer
from famiglia.eventstore.redis_store import RedisEventStore
from services.bots.bootstrap import BotsSettings, bootstrap
from services.bots.dispatcher import GROUP
from services.bots.entrypoints.celery_app import CeleryTasks, make_celery
from services.bots.metrics import group_backlog
from tests.support.metrics import recorded

pytestmark = [pytest.mark.redis, pytest.mark.xdist_group("bots")]


def test_decide_tasks_are_counted_by_policy_name(redis_url: str) -> None:
    with recorded() as seen:
        app = bootstrap(settings=Settings(redis_url=redis_url, secret="test"), bots=BotsSettings())
        tasks = CeleryTasks(make_celery(app), app.metrics)
        with tasks.batch():
            tasks.decide("m1", "highcard", 0, 3, "ismcts?iterations=50")
            tasks.decide("m1", "highcard", 1, 3, "ismcts?iterations=60")
        tasks.decide("m2", "highcard", 0, 5, "random")
    assert redis.Redis.from_url(redis_url).llen(tasks._messages.queue) == 3
    assert seen.value("famiglia.bots.decide_tasks", policy="ismcts") == 2
    assert seen.value("famiglia.bots.decide_tasks", policy="random") == 1


def test_the_dispatchers_backlog_is_its_groups_lag_and_pending_per_partition(redis_url: str) -> None:
    store = RedisEventStore.connect(redis_url, partitions=2)
    PartitionConsumer.for_store(store, GROUP, "dispatcher-test").ensure_groups(start_id="0")
    stream = store.keys.partition_stream(1)
    for n in range(5):
        store.client.xadd(stream, {b"e": b"%d" % n})
    [(_, read)] = store.client.xreadgroup(GROUP, "dispatcher-test", {stream: ">"}, count=2)
    assert len(read) == 2  # read, not acknowledged: pending
    with recorded() as seen:
        app = bootstrap(settings=Settings(redis_url=redis_url, secret="test"), store=store, bots=BotsSettings())
        assert app.metrics is not None
        app.metrics.watch_backlog(lambda: group_backlog(store.client, store.keys.partition_streams(), GROUP))
        assert seen.value("famiglia.bots.dispatcher.pending", partition=1) == 2
        assert seen.value("famiglia.bots.dispatcher.pending", partition=0) == 0
        lag = seen.value("famiglia.bots.dispatcher.lag", partition=1)
        assert lag in (3, None)  # None: a Redis before 7 keeps no lag
    store.close()
