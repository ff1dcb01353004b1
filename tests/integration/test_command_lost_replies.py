"""The command service when Redis ran a write but its reply never came back (Redis killed
after its AOF write, a connection cut): the store sends the append again on a fresh connection,
and what the caller gets must be the answer to its own write, not a refusal of it."""

from __future__ import annotations

import pytest

from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.grpcutil.errors import AppError
from services.command.bootstrap import bootstrap
from tests.unit.command.test_app import SETTINGS, _game

pytestmark = pytest.mark.redis


def _reply_lost_once(store: RedisEventStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The next append runs in Redis, then its connection breaks before the reply is read."""
    from famiglia.eventstore import redis_store

    real = redis_store._exchange
    lost: list[int] = []

    def exchange(conn, request, poll=0.0):  # type: ignore[no-untyped-def]
        reply = real(conn, request, poll)
        if not lost:
            lost.append(1)
            raise ConnectionResetError("reply lost: the connection broke after Redis ran the script")
        return reply

    monkeypatch.setattr(redis_store, "_exchange", exchange)
    return lost


def test_a_creation_without_request_id_whose_reply_was_lost_is_still_the_callers_match(
        redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a request id the creation's append carries no command id, so the store's resend
    after the lost reply meets the match it has just written as a moved version; the caller
    was refused (ABORTED match_exists) for its own match, which was left with seat tokens
    nobody has."""
    store = RedisEventStore.connect(redis_url)
    try:
        app = bootstrap(store=store, settings=SETTINGS)
        engine, seats = _game()
        lost = _reply_lost_once(store, monkeypatch)
        try:
            created = app.create_match(engine.info.game_id, seats, seed=7)
        except AppError as exc:
            pytest.fail(f"the caller's own creation was refused: {exc}")
        assert lost, "the reply was to be lost"
        assert store.version(created.match_id) == created.version > 0
        viewer = app.viewer(created.match_id, created.seat_tokens[0])
        assert viewer.seat == 0
        assert app.get_view(created.match_id, viewer).version == created.version
    finally:
        store.close()
