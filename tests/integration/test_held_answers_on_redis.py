"""NP-H9's slots through the Redis store: held answers staged by one command replica, written
out in a slot a seat by another (`write_out.lua`), and both replicas, a fresh fold, a duplicate
and a replay agreeing afterwards."""

from __future__ import annotations

import pytest

from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.replay.verify import verify_envelopes
from services.command.bootstrap import bootstrap
from tests.unit.command.test_held_answers import (
    SETTINGS,
    _chat,
    _fresh_fold,
    _pass,
    _same_fold,
    _window_of_every_seat,
)

pytestmark = pytest.mark.redis


def test_held_answers_go_out_in_their_seats_slots_through_redis(redis_url: str) -> None:
    one_store, two_store = RedisEventStore.connect(redis_url), RedisEventStore.connect(redis_url)
    try:
        one = bootstrap(store=one_store, settings=SETTINGS)
        created, window = _window_of_every_seat(one, 4)
        match_id, tokens = created.match_id, created.seat_tokens
        two = bootstrap(store=two_store, settings=SETTINGS)
        two.get_view(match_id, two.viewer(match_id, None))
        version = one_store.version(match_id)
        answering, chatter = window.seats[:-1], window.seats[-1]
        for seat in reversed(answering):  # held on one replica, in reverse seat order
            assert _pass(one, match_id, tokens[seat], f"answer-{seat}").held
        # the other replica chats: its append conflicts, it catches up, and writes them out
        assert _chat(two, match_id, tokens[chatter], "chat-1", [answering[0]]).version == version + 4 + 1
        written = one_store.read(match_id, after=version)
        assert [(e.type, e.seat) for e in written[:4]] == [
            ("window_answered", s) if s in answering else ("window_padding", -1) for s in range(4)]
        assert one_store.read_staged(match_id) == []
        one.get_view(match_id, one.viewer(match_id, None))
        for replica in (one, two):
            _same_fold(replica.matches.get(match_id).match, _fresh_fold(replica, match_id))
            again = _pass(replica, match_id, tokens[answering[1]], f"answer-{answering[1]}")
            assert again.duplicate and [e.envelope.seq for e in again.events] == [version + answering[1] + 1]
        assert not _pass(one, match_id, tokens[chatter], "last").held
        assert verify_envelopes(one.registry, one_store.read(match_id)).divergence is None
    finally:
        one_store.close()
        two_store.close()
