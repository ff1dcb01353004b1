"""Ratings in SQL, the same whatever order matches reach the projection.

OpenSkill is order-dependent, and consumers finish matches in no fixed order,
so a scope (a game, a tournament) rates its matches in canonical order — finish
time, then match id (`famiglia.ratings.MatchOutcome.order_key`). A match that
finishes after the scope's watermark is rated incrementally (the usual case);
one that lands "in the past" (a lagging partition) makes the scope recompute
from its finished matches. Either way the tables equal a rebuild's.

The scope row is read FOR UPDATE first, so concurrent consumers rate one scope
one at a time (no lost updates on shared players).
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import delete
from sqlmodel import Session, col, select

from famiglia.ratings import MatchOutcome, Placement, Rating, apply_match, distinct_placements
from famiglia.readmodels.tables import Match, MatchSeat, PlayerRating, RatingScope
from famiglia.telemetry import get_logger

log = get_logger("famiglia.projection.ratings")


def outcome_of(match: Match, seats: Iterable[MatchSeat]) -> MatchOutcome:
    placements = tuple(Placement(s.player_id, s.rank) for s in seats if s.player_id and s.rank is not None)
    return MatchOutcome(match.match_id, match.finished_ms or match.last_event_ms, placements)


class RatingBook:
    def rate(self, session: Session, scope: str, match: Match) -> None:
        """Rate a match that just finished into `scope` (once: the caller's live -> finished transition)."""
        seats = session.exec(select(MatchSeat).where(MatchSeat.match_id == match.match_id)).all()
        outcome = outcome_of(match, seats)
        book = session.get(RatingScope, scope, with_for_update=True)
        if book is None:
            book = RatingScope(scope=scope, last_finished_ms=0, last_match_id="", matches=0)
            session.add(book)
            session.flush()
        if outcome.order_key > (book.last_finished_ms, book.last_match_id):
            self._rate_one(session, scope, outcome)
            book.last_finished_ms, book.last_match_id = outcome.order_key
            book.matches += 1
        else:
            log.info("rating_recompute", scope=scope, match_id=match.match_id)
            self.recompute(session, book)
        session.add(book)

    def _rate_one(self, session: Session, scope: str, outcome: MatchOutcome) -> None:
        players = [p.player_id for p in distinct_placements(outcome.placements)]
        if len(players) < 2:
            return
        rows = {r.player_id: r for r in session.exec(
            select(PlayerRating).where(PlayerRating.scope == scope, col(PlayerRating.player_id).in_(players))).all()}
        known = {pid: Rating(r.mu, r.sigma) for pid, r in rows.items()}
        changed = apply_match(known, outcome)
        ranks = {p.player_id: p.rank for p in distinct_placements(outcome.placements)}
        for player_id, rating in sorted(changed.items()):
            row = rows.get(player_id) or PlayerRating(scope=scope, player_id=player_id, mu=0.0, sigma=0.0,
                                                      ordinal=0.0, matches=0, wins=0)
            row.mu, row.sigma, row.ordinal = rating.mu, rating.sigma, rating.ordinal
            row.matches += 1
            row.wins += 1 if ranks[player_id] == 1 else 0
            session.add(row)

    def recompute(self, session: Session, book: RatingScope) -> None:
        """Rate every finished match of the scope again, in canonical order."""
        scope = book.scope
        kind, _, key = scope.partition(":")
        query = select(Match).where(Match.status == "finished")
        if kind == "game":
            query = query.where(Match.game_id == key)
        elif kind == "tournament":
            query = query.where(Match.tournament_id == key)
        else:
            raise ValueError(f"unknown rating scope {scope!r}")
        matches = session.exec(query).all()
        seats: dict[str, list[MatchSeat]] = {m.match_id: [] for m in matches}
        if matches:
            for seat in session.exec(select(MatchSeat).where(col(MatchSeat.match_id).in_(list(seats)))).all():
                seats[seat.match_id].append(seat)
        outcomes = sorted((outcome_of(m, seats[m.match_id]) for m in matches), key=lambda o: o.order_key)
        ratings: dict[str, Rating] = {}
        counts: dict[str, list[int]] = {}
        for outcome in outcomes:
            ranks = {p.player_id: p.rank for p in distinct_placements(outcome.placements)}
            for player_id in apply_match(ratings, outcome):
                tally = counts.setdefault(player_id, [0, 0])
                tally[0] += 1
                tally[1] += 1 if ranks[player_id] == 1 else 0
        session.execute(delete(PlayerRating).where(col(PlayerRating.scope) == scope))
        session.flush()
        for player_id in sorted(ratings):
            rating = ratings[player_id]
            matches_played, wins = counts[player_id]
            session.add(PlayerRating(scope=scope, player_id=player_id, mu=rating.mu, sigma=rating.sigma,
                                     ordinal=rating.ordinal, matches=matches_played, wins=wins))
        last = outcomes[-1].order_key if outcomes else (0, "")
        book.last_finished_ms, book.last_match_id = last
        book.matches = len(outcomes)
        session.flush()
