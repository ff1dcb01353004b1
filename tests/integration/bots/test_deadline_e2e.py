"""A person's `deadline_ms` over the real path: the command service over gRPC shows it (GetView,
ListLegalCommands, StreamEvents, the same after a reconnect), and the bots' dispatcher and a
real Celery worker play the seat's default when it has passed, one to two graces later."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from famiglia.localstack.redis_server import RedisServer
from famiglia.v1 import envelope_pb2

from .conftest import BotsStack

pytestmark = [pytest.mark.redis, pytest.mark.xdist_group("bots")]

GRACE = 1.0  # the dispatcher's delivery grace: the bounds below are never tighter than it
CLOCK_S = 2


@pytest.fixture(scope="module")
def stack(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BotsStack]:
    import redis

    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    stack = BotsStack(redis_server.url, tmp_path_factory.mktemp("deadline"), clock_grace_seconds=GRACE)
    yield stack
    stack.close()


def test_the_deadline_a_seat_is_shown_is_when_its_default_lands(stack: BotsStack) -> None:
    handle = stack.create_match("highcard", 2, seed=9, options={"hand": "2", "clock_s": str(CLOCK_S)},
                                seat_info=[envelope_pb2.SeatInfo(seat=1, bot=True, policy="random")])
    person = stack.client.seat(handle.match_id, handle.seat_tokens[0])
    waited = time.monotonic() + 30
    view = person.view()
    while 0 not in {p.seat for p in view.to_act}:  # the bot may lead first
        assert time.monotonic() < waited, "the person was never asked"
        time.sleep(0.05)
        view = person.view()
    deadline = next(p.deadline_ms for p in view.to_act if p.seat == 0)
    asked_at = stack.command.store.read(handle.match_id, after=view.version - 1, limit=1)[0]
    # counted from the event that asked the seat, as stamped: nothing here depends on timing
    assert deadline == asked_at.timestamp.ToMilliseconds() + CLOCK_S * 1000
    # a reconnect (a new client), its legal commands and its stream show the same moment
    again = stack.client.seat(handle.match_id, handle.seat_tokens[0])
    legal = again.legal_commands()
    if legal.version == view.version:
        assert legal.deadline_ms == deadline
        assert [r.deadline_ms for r in again.stream(until_now=True) if r.HasField("deadline_ms")][-1] == deadline
    # the bot's seat has no clock; a spectator is shown none
    assert all(p.deadline_ms == 0 for p in stack.client.spectator(handle.match_id).view().to_act)
    assert stack.client.seat(handle.match_id, handle.seat_tokens[1]).legal_commands().deadline_ms == 0

    waited = time.monotonic() + CLOCK_S + 2 * GRACE + 30  # a loaded machine delivers late, never early
    landed = None
    while landed is None:
        assert time.monotonic() < waited, "the clock never played the seat's default"
        landed = next((e for e in stack.command.store.read(handle.match_id, after=view.version)
                       if e.seat == 0 and e.command_id.startswith("clock:")), None)
        time.sleep(0.05)
    landed_ms = landed.timestamp.ToMilliseconds()
    assert landed.seq == view.version + 1  # nothing else moved the match meanwhile: its own clock
    assert landed_ms >= deadline + GRACE * 1000 - 1  # never before the deadline and its grace
