"""A seated player's older tickets after a later attempt failed, and a creation that fails after
another matcher finished its table."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from services.matchmaking.creator import CreateFailed
from services.matchmaking.holds import Hold, hold_key
from services.matchmaking.matcher import MatcherTuning
from services.matchmaking.store import Keys
from tests.integration.matchmaking.conftest import GAME, FakeClock, RecordingCreator, make_mm
from tests.integration.matchmaking.test_matchmaking_rules import DUEL, Crash, _crash


def _guest_after(mm: Any, floor: str, name: str) -> str:
    """A guest whose id sorts after `floor` (holds are taken in player-id order)."""
    while True:
        p = mm.app.register_guest(name)[0].player_id
        if p > floor:
            return p


def test_a_failed_take_for_a_new_ticket_still_knows_the_player_is_seated(redis_url: str,
                                                                         creator: RecordingCreator) -> None:
    """A newer ticket's attempt replaces the player's `seated` hold by its lease; should that
    attempt give up (another player busy, a lost claim, its matcher dying), the player's older
    tickets in other games are still known stale (`seated_key`): before, the hold was simply
    deleted, and the player was seated a second time from a wish made before their first table."""
    clock = FakeClock()
    crashed = make_mm(redis_url, creator, clock=clock)
    a, b, c = (crashed.app.register_guest(n)[0].player_id for n in "ABC")
    duel = crashed.app.create_ticket(a, DUEL, [], {}).ticket_id
    parlour = crashed.app.create_ticket(a, GAME, [2], {}).ticket_id  # asked before A's duel table
    crashed.app.create_ticket(b, DUEL, [], {})
    crashed.app.create_ticket(c, GAME, [2], {})
    clock.advance(0.001)
    crashed.matcher._leave_other_queues = _crash  # type: ignore[method-assign]  # dies right after finalize
    with pytest.raises(Crash):
        crashed.matcher.tick(DUEL)
    assert crashed.app.ticket(a, duel).state == "matched"

    other = make_mm(redis_url, creator, clock=clock)
    clock.advance(1)
    other.app.create_ticket(a, DUEL, [], {})  # A wants another duel: a new wish, after the table
    d = _guest_after(other, a, "D")
    other.app.create_ticket(d, DUEL, [], {})
    client = other.app.store.client
    client.set(hold_key(d), Hold("lease", GAME, "p-elsewhere", "x").encode(), px=60_000)  # D is being seated elsewhere
    assert other.matcher.tick(DUEL) == 0  # A's hold: table -> seated -> lease -> given back (deleted)
    client.delete(hold_key(d))

    assert other.matcher.tick(GAME) == 0, "A's parlour ticket is older than A's duel table: it must not be seated"
    assert other.app.ticket(a, parlour).state == "cancelled"
    assert Counter(creator.seated_players())[a] == 1
    other.close()
    crashed.close()


def test_a_late_transient_failure_leaves_a_finished_proposal_gone(redis_url: str,
                                                                        creator: RecordingCreator) -> None:
    """A CreateMatch slower than the claim retry fails after another matcher finished the table:
    counting that attempt must not make the finished proposal anew (HINCRBY on a deleted key
    did, with no expiry: `proposal_pending` then held for good, a `table` hold its crashed
    finisher left was never settled, and the players could not be matched anywhere)."""
    clock = FakeClock()
    slow = make_mm(redis_url, creator, clock=clock, tuning=MatcherTuning(claim_retry_ms=5000))
    rescuer = make_mm(redis_url, creator, clock=clock, tuning=MatcherTuning(claim_retry_ms=5000))
    rescuer.matcher._leave_other_queues = _crash  # type: ignore[method-assign]  # dies after finalize, before seat
    a, b = (slow.app.register_guest(n)[0].player_id for n in "AB")
    slow.app.create_ticket(a, DUEL, [], {})
    slow.app.create_ticket(b, DUEL, [], {})

    class Slow:
        def create_match(self, *args: Any, **kwargs: Any) -> Any:
            clock.advance(6)  # CreateMatch hangs past the claim retry ...
            with pytest.raises(Crash):
                rescuer.matcher.tick(DUEL)  # ... another matcher finishes the table (and dies before seating)
            raise CreateFailed("DEADLINE_EXCEEDED: slow", permanent=False)  # ... then ours times out

    slow.matcher.creator = Slow()  # type: ignore[assignment]
    assert slow.matcher.tick(DUEL) == 0
    leaked = [k for k in slow.app.store.client.scan_iter(Keys(DUEL).tag + ":proposal:*")
              if slow.app.store.client.pttl(k) < 0]

    clock.advance(1)  # A and B queue again: a new wish, after their table
    slow.app.create_ticket(a, DUEL, [], {})
    slow.app.create_ticket(b, DUEL, [], {})
    fresh = make_mm(redis_url, creator, clock=clock)
    assert fresh.matcher.run_once() == 1, "A and B are held by a `table` hold whose proposal never ends"
    assert leaked == [], "a finished proposal's key was recreated without a TTL"
    for m in (slow, rescuer, fresh):
        m.close()
