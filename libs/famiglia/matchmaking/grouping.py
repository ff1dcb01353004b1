"""Which tables to form now from the tickets of a queue.

Fairness: the oldest ticket of a pool chooses first. Its rating window (which widens
with its wait) decides who may join it; among those, older tickets are preferred.
A table is formed only when it is exactly full, parties included whole (a party
is one ticket), every ticket accepting the table size. When the oldest ticket has
waited past the backfill timeout and no full table exists, it takes the table with
the most humans it can get (then the fewest bots) and bots fill the rest.

Each ticket lands in at most one proposal per call; whether a proposal becomes a
match is decided by the atomic claim in Redis, not here.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterable, Sequence
from itertools import islice

from .model import Proposal, Ticket
from .policy import MatchPolicy

SEARCH_BUDGET = 4096
"""Nodes the exact-fill search may visit per table size: tables are small, queues may not be."""


def form_matches(tickets: Iterable[Ticket], now_ms: int, policy: MatchPolicy) -> list[Proposal]:
    pools: dict[str, list[Ticket]] = defaultdict(list)
    for t in tickets:
        pools[t.pool].append(t)
    proposals: list[Proposal] = []
    for pool in sorted(pools):
        queue = sorted(pools[pool], key=lambda t: (t.created_ms, t.ticket_id))
        proposals += _form_in_pool(queue, now_ms, policy)
    return proposals


def _form_in_pool(queue: list[Ticket], now_ms: int, policy: MatchPolicy) -> list[Proposal]:
    used: set[str] = set()
    out: list[Proposal] = []
    by_rating = sorted(range(len(queue)), key=lambda i: queue[i].rating)
    ratings = [queue[i].rating for i in by_rating]
    for anchor in queue:
        if anchor.ticket_id in used:
            continue
        waited = anchor.waited(now_ms)
        window = policy.window(waited)
        lo = bisect_left(ratings, anchor.rating - window)
        hi = bisect_right(ratings, anchor.rating + window)
        if hi - lo <= 4 * policy.max_candidates:  # a narrow window: look only inside it
            inside: Iterable[Ticket] = (queue[i] for i in sorted(by_rating[lo:hi]))
        else:  # a wide one: the queue in age order, stopping at max_candidates
            inside = (t for t in queue if abs(t.rating - anchor.rating) <= window)
        candidates = list(islice((t for t in inside
                                  if t.ticket_id not in used and t.ticket_id != anchor.ticket_id
                                  and not t.seat_counts.isdisjoint(anchor.seat_counts)),
                                 policy.max_candidates))
        proposal = _full_table(anchor, candidates)
        if proposal is None and policy.backfill_due(waited):
            proposal = _backfilled_table(anchor, candidates)
        if proposal is not None:
            used.update(t.ticket_id for t in proposal.tickets)
            out.append(proposal)
    return out


def _full_table(anchor: Ticket, candidates: Sequence[Ticket]) -> Proposal | None:
    """The largest exactly-full table the anchor accepts (more players served at once)."""
    for seats in sorted(anchor.seat_counts, reverse=True):
        fitting = [t for t in candidates if seats in t.seat_counts]
        chosen = _exact_fill(fitting, seats - anchor.size)
        if chosen is not None:
            return Proposal(anchor.game_id, anchor.pool, seats, (anchor, *chosen))
    return None


def _exact_fill(candidates: Sequence[Ticket], room: int) -> tuple[Ticket, ...] | None:
    """Tickets whose sizes sum to `room` exactly, the oldest ones preferred (depth first,
    taking a ticket before skipping it), within SEARCH_BUDGET steps."""
    if room == 0:
        return ()
    if sum(t.size for t in candidates) < room:
        return None
    budget = [SEARCH_BUDGET]
    chosen: list[Ticket] = []

    def search(i: int, left: int) -> bool:
        if left == 0:
            return True
        budget[0] -= 1
        if i >= len(candidates) or budget[0] <= 0:
            return False
        t = candidates[i]
        if t.size <= left:
            chosen.append(t)
            if search(i + 1, left - t.size):
                return True
            chosen.pop()
        return search(i + 1, left)

    return tuple(chosen) if search(0, room) else None


def _backfilled_table(anchor: Ticket, candidates: Sequence[Ticket]) -> Proposal:
    """The most humans the anchor can sit with (oldest first), then the fewest bots. Each size
    asks the exact-fill search for its most seats first: taking tickets oldest first until one
    does not fit would let an older pair keep a newer trio (one more person) out."""
    best: Proposal | None = None
    for seats in sorted(anchor.seat_counts):
        fitting = [t for t in candidates if seats in t.seat_counts]
        room = seats - anchor.size
        taken = next(chosen for humans in range(room, -1, -1)
                     if (chosen := _exact_fill(fitting, humans)) is not None)
        proposal = Proposal(anchor.game_id, anchor.pool, seats, (anchor, *taken))
        if best is None or (proposal.humans, -proposal.bots) > (best.humans, -best.bots):
            best = proposal
    assert best is not None  # seat_counts is never empty
    return best
