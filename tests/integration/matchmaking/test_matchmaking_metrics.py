"""The matchmaking service's metrics, recorded by real tickets matched on a real Redis."""

from __future__ import annotations

from famiglia.matchmaking import MatchPolicy
from tests.support.metrics import recorded

from .conftest import GAME, FakeClock, RecordingCreator, make_mm


def test_a_table_made_counts_it_its_backfill_and_its_tickets_waits(redis_url: str, creator: RecordingCreator) -> None:
    clock = FakeClock()
    with recorded() as seen:
        mm = make_mm(redis_url, creator, policy=MatchPolicy(backfill_after=30, bot_policy="random"), clock=clock)
        alone = mm.app.register_guest("Alone")[0].player_id
        mm.app.create_ticket(alone, GAME, [3, 4], {})
        assert seen.value("famiglia.matchmaking.searching", game=GAME) == 1
        assert seen.value("famiglia.matchmaking.searching", game="duel") == 0
        clock.advance(30)
        assert mm.matcher.run_once() == 1
        first, second = (mm.app.register_guest(name)[0].player_id for name in "AB")
        for player in (first, second):
            mm.app.create_ticket(player, "duel", [2], {})
        clock.advance(2)
        assert mm.matcher.run_once() == 1
        mm.close()
    assert seen.value("famiglia.matchmaking.searching", game=GAME) == 0
    assert seen.value("famiglia.matchmaking.tables", game=GAME) == 1
    assert seen.value("famiglia.matchmaking.backfills", game=GAME) == 1  # two bots at one table
    assert seen.value("famiglia.matchmaking.wait", game=GAME) == (1, 30.0)  # (tickets, seconds)
    assert seen.value("famiglia.matchmaking.tables", game="duel") == 1
    assert seen.value("famiglia.matchmaking.backfills", game="duel") is None
    assert seen.value("famiglia.matchmaking.wait", game="duel") == (2, 4.0)
