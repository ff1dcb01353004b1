"""The bots service started while Redis was away makes its dispatcher's group from the
dispatcher's thread once Redis answers (`services.bots.__main__._dispatch`). Redis may come back
refusing the write for a while (MISCONF: its disk full; READONLY: a replica for a moment): the
thread died on that refusal, and the service ran on, SERVING, with no dispatcher for good."""

from __future__ import annotations

import threading

import pytest
import redis

from services.bots.__main__ import _dispatch


class Consumer:
    def __init__(self, answers: list[Exception | None]) -> None:
        self.answers = answers

    def ensure_groups(self, start_id: str) -> None:
        assert start_id == "$"
        answer = self.answers.pop(0)
        if answer is not None:
            raise answer


class Dispatcher:
    ran = False

    def run(self, consumer: Consumer, stop: threading.Event, *, block_ms: int) -> None:
        self.ran = True


def test_the_dispatcher_runs_once_redis_takes_its_group_after_refusing_it() -> None:
    consumer = Consumer([redis.exceptions.ConnectionError("away"),
                         redis.exceptions.ResponseError("MISCONF Redis is configured to save RDB snapshots, "
                                                        "but it's currently unable to persist to disk"),
                         None])
    dispatcher = Dispatcher()
    _dispatch(dispatcher, consumer, threading.Event(), False, 100)  # type: ignore[arg-type]
    assert dispatcher.ran and not consumer.answers


def test_a_stopped_service_does_not_wait_for_its_group() -> None:
    stop = threading.Event()
    stop.set()
    dispatcher = Dispatcher()
    _dispatch(dispatcher, Consumer([]), stop, False, 100)  # type: ignore[arg-type]
    assert not dispatcher.ran


def test_a_redis_refusing_the_group_at_start_is_waited_for_and_a_bug_is_not() -> None:
    """`store_away` says which errors are Redis's for now (famiglia.grpcutil.errors): away or
    refusing, the service starts and its dispatcher's thread makes the group; any other error
    stops it at start."""
    from services.bots.__main__ import _ensure_groups

    for away in (redis.exceptions.ConnectionError("away"), redis.exceptions.TimeoutError("slow"),
                 redis.exceptions.ReadOnlyError("You can't write against a read only replica."),
                 redis.exceptions.ResponseError("MISCONF Redis is configured to save RDB snapshots"),
                 redis.exceptions.BusyLoadingError("Redis is loading the dataset in memory")):
        assert not _ensure_groups(Consumer([away])), away  # type: ignore[arg-type]
    assert _ensure_groups(Consumer([None]))  # type: ignore[arg-type]
    with pytest.raises(redis.exceptions.ResponseError):
        _ensure_groups(Consumer([redis.exceptions.ResponseError("WRONGTYPE Operation against a key")]))  # type: ignore[arg-type]
