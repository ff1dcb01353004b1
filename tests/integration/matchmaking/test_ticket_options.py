"""CreateTicket asks the game about the ticket's options: a refused ticket is answered
INVALID_ARGUMENT with the game's rule id and nothing is queued (the audit's ticket stayed
`searching` while the matcher retried CreateMatch for ever)."""

from __future__ import annotations

import pytest
import redis

from famiglia.config import Settings
from famiglia.engine.registry import default_registry
from famiglia.grpcutil.errors import InvalidArgument
from famiglia.matchmaking import FixedRatings, MatchPolicy
from services.matchmaking.bootstrap import bootstrap, games_of
from services.matchmaking.matcher import MatcherTuning
from services.matchmaking.settings import MatchmakingSettings

from .conftest import SECRET, RecordingCreator


def test_a_ticket_with_options_the_game_refuses_is_not_queued(redis_url: str) -> None:
    settings = Settings(redis_url=redis_url, secret=SECRET)
    mm = bootstrap(settings=settings, mm=MatchmakingSettings(policy=MatchPolicy(backfill_after=None),
                                                             tuning=MatcherTuning(interval_s=0.02)),
                   client=redis.Redis.from_url(redis_url, decode_responses=True), creator=RecordingCreator(),
                   games=games_of(default_registry()), ratings=FixedRatings())
    try:
        player, _ = mm.app.register_guest("Vito")
        with pytest.raises(InvalidArgument) as exc:
            mm.app.create_ticket(player.player_id, "grifters", [2], {"isk_tokens": "99999999999999999999"})
        assert exc.value.code == "GR-F01" and "isk_tokens" in exc.value.message
        assert not mm.app.store.queued("grifters")
        made = mm.app.create_ticket(player.player_id, "nostra_city", [], {"first_player_seat": "4"})
        assert made.status.seat_counts == (5,)
    finally:
        mm.close()
