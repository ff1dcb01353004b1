"""How patient matchmaking is: the rating window, bot backfill and ticket lifetime.

The window is in OpenSkill mu points around the oldest ticket of a table. It starts
narrow (close games for those who can wait a moment) and widens linearly with that
ticket's waiting time, so nobody waits forever for a perfect opponent.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class MatchPolicy:
    window_start: float = 3.0
    """mu points either side of the oldest ticket, at once."""
    window_growth: float = 1.0
    """mu points added per second that ticket has waited."""
    window_max: float = 50.0
    backfill_after: float | None = 30.0
    """seconds after which a waiting ticket's table is completed with bots (None: never)."""
    bot_policy: str = "heuristic"
    """the bots service's policy for backfilled seats (random, heuristic, ismcts)."""
    ticket_ttl: float = 600.0
    """seconds a ticket may search before it expires."""
    invite_ttl: float = 120.0
    """seconds a party ticket waits for its invitees to accept before it expires."""
    max_candidates: int = 64
    """how many compatible tickets one table's search looks at (keeps a tick cheap)."""

    def window(self, waited_s: float) -> float:
        return min(self.window_max, self.window_start + self.window_growth * max(0.0, waited_s))

    def backfill_due(self, waited_s: float) -> bool:
        return self.backfill_after is not None and waited_s >= self.backfill_after


def estimate_wait(policy: MatchPolicy, waited_s: float, recent_wait_s: float | None) -> float:
    """A guess at the seconds still to wait: the pool's recent average wait, never beyond the
    backfill timeout (bots guarantee a table by then), less what the ticket has waited."""
    expected = recent_wait_s if recent_wait_s is not None else (policy.backfill_after or 60.0)
    if policy.backfill_after is not None:
        expected = min(expected, policy.backfill_after)
    return max(0.0, expected - waited_s)
