"""Matchmaking's pure core: which tickets may share a table, and which tables to form.

No Redis, gRPC or clock here: the matchmaking service loads tickets, asks this
package for proposals and claims them atomically (services/matchmaking). Modules in
reading order:

    model.py      Ticket, Proposal, GameShape: the data
    ratings.py    the rating provider port and the default rating (OpenSkill mu 25, sigma 25/3)
    policy.py     MatchPolicy: rating windows that widen with waiting, bot backfill, lifetimes
    compat.py     a ticket request made canonical: seat counts, options, the pool it queues in
    shapes.py     the GameShape of each registered game (for the service and clients' own checks)
    grouping.py   form_matches: oldest first, parties together, exact tables, then backfill
    seating.py    who sits where: a deterministic shuffle of humans and bots per proposal
"""

from .compat import InvalidRequest, TicketRequest, normalize_request, pool_key
from .grouping import form_matches
from .model import GameShape, OptionCheck, Proposal, Ticket
from .policy import MatchPolicy, estimate_wait
from .ratings import DEFAULT_RATING, FixedRatings, Rating, RatingProvider, party_rating
from .seating import SeatPlan, plan_seats

__all__ = [
    "DEFAULT_RATING",
    "FixedRatings",
    "GameShape",
    "InvalidRequest",
    "MatchPolicy",
    "OptionCheck",
    "Proposal",
    "Rating",
    "RatingProvider",
    "SeatPlan",
    "Ticket",
    "TicketRequest",
    "estimate_wait",
    "form_matches",
    "normalize_request",
    "party_rating",
    "plan_seats",
    "pool_key",
]
