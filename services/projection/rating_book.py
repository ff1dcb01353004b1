"""Ratings in SQL, the same whatever order matches reach the projection.

OpenSkill is order-dependent, and consumers finish matches in no fixed order,
so a scope (a game, a tournament) rates its matches in canonical order — finish
time, then match id (`famiglia.ratings.MatchOutcome.order_key`). A match that
finishes after the scope's watermark is rated on top of the current ratings
(the usual case). One that lands "in the past" (a lagging partition) re-rates
the scope from that point: the ratings just before it come from
`rating_history`, and only the matches after it are rated again. Either way
the tables equal a rebuild's.

The scope row is read FOR UPDATE first, so concurrent consumers rate one scope
one at a time (no lost updates on shared players).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy import and_, case, delete, func, or_
from sqlmodel import Session, col, select

from famiglia.ratings import (
    DEFAULT_RATING,
    MatchOutcome,
    Placement,
    Rating,
    apply_match,
    distinct_placements,
    ranks_with_leavers,
)
from famiglia.readmodels.tables import Match, MatchSeat, PlayerRating, RatingHistory, RatingScope
from famiglia.telemetry import get_logger

log = get_logger("famiglia.projection.ratings")


def outcome_of(match: Match, seats: Iterable[MatchSeat]) -> MatchOutcome:
    """As the projector rated it when it finished (`projector._rated`): a seat its player left
    to the bots (`MatchSeat.away`) ranked last."""
    ranked = [s for s in seats if s.rank is not None]
    ranks = ranks_with_leavers([(int(s.rank), bool(s.away)) for s in ranked])  # type: ignore[arg-type]
    placements = tuple(Placement(s.player_id, rank) for s, rank in zip(ranked, ranks, strict=True) if s.player_id)
    return MatchOutcome(match.match_id, match.finished_ms or match.last_event_ms, placements)


def _scope_filter(scope: str):  # type: ignore[no-untyped-def]
    kind, _, key = scope.partition(":")
    if kind == "game":
        return Match.game_id == key
    if kind == "tournament":
        tournament_id, _, game_id = key.rpartition(":")
        return and_(col(Match.tournament_id) == tournament_id, col(Match.game_id) == game_id)
    raise ValueError(f"unknown rating scope {scope!r}")


class RatingBook:
    def rate(self, session: Session, scope: str, outcome: MatchOutcome) -> None:
        """Rate a match that just finished into `scope` (once: the caller's live -> finished transition)."""
        book = session.get(RatingScope, scope, with_for_update=True)
        if book is None:
            book = RatingScope(scope=scope, last_finished_ms=0, last_match_id="", matches=0)
            session.add(book)
            session.flush()
        if outcome.order_key > (book.last_finished_ms, book.last_match_id):
            self._rate_next(session, scope, outcome)
            book.last_finished_ms, book.last_match_id = outcome.order_key
        else:
            self._rerate_from(session, scope, outcome.order_key, (book.last_finished_ms, book.last_match_id))
        book.matches += 1
        session.add(book)

    # -- internals ------------------------------------------------------------------------
    def _rate_next(self, session: Session, scope: str, outcome: MatchOutcome) -> None:
        """The usual case, a match after the watermark: rated on top of the players' current ratings,
        their counts moved on by one (no recount of their history, which only grows)."""
        ranks = {p.player_id: p.rank for p in distinct_placements(outcome.placements)}
        if not ranks:
            return
        rows = {r.player_id: r for r in session.exec(select(PlayerRating).where(
            PlayerRating.scope == scope, col(PlayerRating.player_id).in_(sorted(ranks)))).all()}
        ratings = {pid: Rating(r.mu, r.sigma) for pid, r in rows.items()}
        before = {p: ratings.get(p, DEFAULT_RATING) for p in ranks}
        for player_id, after in sorted(apply_match(ratings, outcome).items()):
            session.add(_history(scope, outcome, player_id, ranks[player_id], before[player_id], after))
            row = rows.get(player_id) or PlayerRating(scope=scope, player_id=player_id, mu=0.0, sigma=0.0,
                                                      ordinal=0.0, matches=0, wins=0)
            row.mu, row.sigma, row.ordinal = after.mu, after.sigma, after.ordinal
            row.matches += 1
            row.wins += 1 if ranks[player_id] == 1 else 0
            session.add(row)

    def _rerate_from(self, session: Session, scope: str, key: tuple[int, str], watermark: tuple[int, str]) -> None:
        """Rate again every finished match of the scope from `key` to the watermark (the last one rated),
        starting from the ratings just before `key`. Later matches are rated when their turn comes."""
        ms, match_id = key
        top_ms, top_id = watermark
        window = and_(
            or_(col(Match.finished_ms) > ms, and_(col(Match.finished_ms) == ms, col(Match.match_id) >= match_id)),
            or_(col(Match.finished_ms) < top_ms, and_(col(Match.finished_ms) == top_ms, col(Match.match_id) <= top_id)),
        )
        matches = session.exec(select(Match).where(Match.status == "finished", _scope_filter(scope), window)).all()
        seats: dict[str, list[MatchSeat]] = {m.match_id: [] for m in matches}
        if matches:
            for seat in session.exec(select(MatchSeat).where(col(MatchSeat.match_id).in_(list(seats)))).all():
                seats[seat.match_id].append(seat)
        outcomes = sorted((outcome_of(m, seats[m.match_id]) for m in matches), key=lambda o: o.order_key)
        players = sorted({p.player_id for o in outcomes for p in distinct_placements(o.placements)})
        log.info("rating_rerate", scope=scope, from_match=match_id, matches=len(outcomes), players=len(players))
        start = {p: r for p in players if (r := self._before(session, scope, p, key)) is not None}
        session.execute(delete(RatingHistory).where(
            col(RatingHistory.scope) == scope,
            or_(col(RatingHistory.order_ms) > ms,
                and_(col(RatingHistory.order_ms) == ms, col(RatingHistory.match_id) >= match_id))))
        session.flush()
        self._rate(session, scope, outcomes, start)

    def _before(self, session: Session, scope: str, player_id: str, key: tuple[int, str]) -> Rating | None:
        ms, match_id = key
        row = session.exec(
            select(RatingHistory).where(
                RatingHistory.scope == scope, RatingHistory.player_id == player_id,
                or_(col(RatingHistory.order_ms) < ms,
                    and_(col(RatingHistory.order_ms) == ms, col(RatingHistory.match_id) < match_id)))
            .order_by(col(RatingHistory.order_ms).desc(), col(RatingHistory.match_id).desc()).limit(1)
        ).first()
        return None if row is None else Rating(row.mu_after, row.sigma_after)

    def _rate(self, session: Session, scope: str, outcomes: Sequence[MatchOutcome],
              ratings: dict[str, Rating]) -> None:
        """Rate `outcomes` in order on top of `ratings`, recording history and the players' final ratings."""
        touched: set[str] = set()
        for outcome in outcomes:
            ranks = {p.player_id: p.rank for p in distinct_placements(outcome.placements)}
            before = {p: ratings.get(p, DEFAULT_RATING) for p in ranks}
            for player_id, after in sorted(apply_match(ratings, outcome).items()):
                session.add(_history(scope, outcome, player_id, ranks[player_id], before[player_id], after))
                touched.add(player_id)
        if not touched:
            return
        session.flush()
        counts = {pid: (int(n), int(w or 0)) for pid, n, w in session.exec(
            select(RatingHistory.player_id, func.count(), func.sum(case((col(RatingHistory.rank) == 1, 1), else_=0)))
            .where(RatingHistory.scope == scope, col(RatingHistory.player_id).in_(sorted(touched)))
            .group_by(col(RatingHistory.player_id))).all()}
        rows = {r.player_id: r for r in session.exec(select(PlayerRating).where(
            PlayerRating.scope == scope, col(PlayerRating.player_id).in_(sorted(touched)))).all()}
        for player_id in sorted(touched):
            rating = ratings[player_id]
            row = rows.get(player_id) or PlayerRating(scope=scope, player_id=player_id, mu=0.0, sigma=0.0,
                                                      ordinal=0.0, matches=0, wins=0)
            row.mu, row.sigma, row.ordinal = rating.mu, rating.sigma, rating.ordinal
            row.matches, row.wins = counts.get(player_id, (0, 0))
            session.add(row)


def _history(scope: str, outcome: MatchOutcome, player_id: str, rank: int, before: Rating,
             after: Rating) -> RatingHistory:
    """One player's rating change by one match, as the history keeps it."""
    return RatingHistory(scope=scope, match_id=outcome.match_id, player_id=player_id,
                         order_ms=outcome.finished_at_ms, rank=rank, mu_before=before.mu,
                         sigma_before=before.sigma, mu_after=after.mu, sigma_after=after.sigma)
