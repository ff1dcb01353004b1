"""A creation's request id on a real Redis, before and after its match is archived.

The creation record (`cmd:<match>:create:<match>`) lives as long as the match's stream: a retry
then answers with every seat's token. Retention (or `famiglia match sweep`, then retention)
trims the stream and the record with it; the version key stays, so the match id is taken for
good, and what the retry asked for can no longer be compared with what was made."""

from __future__ import annotations

import pytest

from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.grpcutil.errors import AlreadyExists
from famiglia.v1 import envelope_pb2
from services.command.bootstrap import bootstrap
from tests.unit.command.test_app import SETTINGS, _game

pytestmark = pytest.mark.redis

REQUEST_ID = "creation-0123456789abcdef"


def test_a_creation_request_id_sent_again_after_the_sweep_is_refused_naming_the_archived_match(
        redis_url: str) -> None:
    """It was answered with the archived match's tokens (a match that takes no command any more)
    whatever it asked for, and put the match back among its player's live matches."""
    store = RedisEventStore.connect(redis_url)
    try:
        app = bootstrap(store=store, settings=SETTINGS)
        engine, seats = _game()
        seating = [envelope_pb2.SeatInfo(seat=0, player_id="p-vito", display_name="Vito")]
        first = app.create_match(engine.info.game_id, seats, seat_info=seating, request_id=REQUEST_ID)
        retried = app.create_match(engine.info.game_id, seats, seat_info=seating, request_id=REQUEST_ID)
        assert retried.seat_tokens == first.seat_tokens  # the record lives as long as the match
        app.cancel_match(first.match_id, "operator", "swept: idle", request_id=f"sweep:{first.match_id}")
        assert app.players.newest("p-vito", 10) == []
        assert store.trim(first.match_id) > 0  # retention, once the match is archived

        for asked in (dict(seat_info=seating), dict(seat_info=[])):  # the same creation, another one
            with pytest.raises(AlreadyExists) as refused:
                app.create_match(engine.info.game_id, seats, request_id=REQUEST_ID, **asked)  # type: ignore[arg-type]
            assert refused.value.code == "request_id_reused"
            assert refused.value.metadata == {"match_id": first.match_id}
        assert app.players.newest("p-vito", 10) == []
        assert store.read(first.match_id) == []  # nothing written under the archived match's id
        assert app.create_match(engine.info.game_id, seats, request_id=REQUEST_ID + "-new").match_id != first.match_id
    finally:
        store.close()
