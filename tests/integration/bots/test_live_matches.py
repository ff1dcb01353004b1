"""The dispatcher's live-match set on a real Redis (services/bots/dispatcher.py, LiveMatches)."""

from __future__ import annotations

import uuid

from famiglia.eventstore.redis_store import RedisEventStore
from services.bots.dispatcher import RedisLiveMatches, live_matches_of


def test_the_live_set_sits_beside_the_store_and_outlives_its_dispatcher(redis_url: str) -> None:
    store = RedisEventStore.connect(redis_url)
    try:
        live = live_matches_of(store)
        assert isinstance(live, RedisLiveMatches) and live.key.startswith(store.keys.prefix)
        a, b = f"m{uuid.uuid4().hex[:8]}", f"m{uuid.uuid4().hex[:8]}"
        live.add(a)
        live.add(b)
        live.add(a)
        live.remove(b)
        assert live_matches_of(store).members().count(a) == 1  # another dispatcher reads the same set
        assert b not in live_matches_of(store).members()
        live.remove(a)
    finally:
        store.close()
