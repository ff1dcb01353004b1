"""Read-side queries over the read models, returning plain values (no ORM objects escape).

Pagination is by keyset, not offset: a page token names the last row served,
so pages stay stable while new matches arrive. Matches are listed newest first
by (created time, match id).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_, exists, or_
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, func, select

from famiglia.ratings import Rating

from .tables import Match, MatchSeat, Player, PlayerRating, RatingHistory

MAX_PAGE = 500
DEFAULT_PAGE = 50
MAX_TOKEN_CHARS = 512
"""Tokens we hand out are ~40 characters; a longer one is refused before it is decoded."""
MAX_MATCH_ID_CHARS = 256
MAX_GAME_ID_CHARS = 64
"""The longest game id a match row holds (`Match.game_id`)."""
INT64_MAX = (1 << 63) - 1


class BadPageToken(ValueError):
    """A page token this server did not hand out."""


def game_scope(game_id: str) -> str:
    return f"game:{game_id}"


def seed_to_db(seed: int) -> int:
    """uint64 seeds stored in a signed BIGINT (two's complement)."""
    return seed - (1 << 64) if seed >= (1 << 63) else seed


def seed_from_db(value: int) -> int:
    return value + (1 << 64) if value < 0 else value


@dataclass(frozen=True, slots=True)
class SeatSummary:
    seat: int
    player_id: str
    display_name: str
    bot: bool
    policy: str
    score: float | None
    rank: int | None
    winner: bool
    details: Mapping[str, str]
    away: str = ""
    """Why its player left it to the bots ("left", "timeouts"), or "" while the player plays."""
    away_since: int | None = None
    """The seq of the `seat_left` that made it the bots'."""


@dataclass(frozen=True, slots=True)
class MatchSummary:
    match_id: str
    game_id: str
    status: str
    seats: tuple[SeatSummary, ...]
    created_ms: int
    finished_ms: int | None
    last_event_ms: int
    version: int
    seed: int | None
    """Only once finished: while a match runs its seed would predict every draw."""
    options: Mapping[str, str]
    tournament_id: str
    outcome: Mapping[str, str]
    rematch_of: str = ""
    """The finished match this one is the rematch of (AskRematch); "" for none."""
    rematch_id: str = ""
    """The rematch made of this one (the newest made, were there ever two: a server before the
    rematch's window let a table ask again once its asks expired, and GetRematch names the
    newest); "" for none yet."""


@dataclass(frozen=True, slots=True)
class Page:
    matches: list[MatchSummary]
    next_page_token: str = ""


@dataclass(frozen=True, slots=True)
class LeaderboardEntry:
    rank: int
    player_id: str
    display_name: str
    bot: bool
    policy: str
    mu: float
    sigma: float
    ordinal: float
    matches: int
    wins: int


@dataclass(frozen=True, slots=True)
class PlayerInfo:
    player_id: str
    display_name: str
    bot: bool
    policy: str
    first_seen_ms: int
    last_seen_ms: int


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    match: MatchSummary
    seat: int
    rating_before: Rating | None = None
    """The player's rating in the game before and after this match (None until it is rated)."""
    rating_after: Rating | None = None


@dataclass(frozen=True, slots=True)
class PlayerHistory:
    player: PlayerInfo | None
    entries: list[HistoryEntry]
    ratings: dict[str, LeaderboardEntry] = field(default_factory=dict)
    """game id -> the player's rating there."""
    next_page_token: str = ""


# -- page tokens -------------------------------------------------------------------------
def encode_token(created_ms: int, match_id: str) -> str:
    raw = json.dumps([created_ms, match_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_token(token: str) -> tuple[int, str]:
    """(created_ms, match_id) of a token `encode_token` made; BadPageToken for anything else.

    A token comes from the client, so every step may fail: its length is bounded before
    decoding (deep JSON nesting), the JSON must be exactly [int, str] (no floats such as 1e400,
    no NaN), created_ms must fit the BIGINT column it is compared with, and the match id must be
    text a database holds (no NUL, no lone surrogate)."""
    shown = token if len(token) <= 40 else token[:40] + "..."
    if len(token) > MAX_TOKEN_CHARS:
        raise BadPageToken(f"bad page token {shown!r}: too long")
    try:
        raw = base64.b64decode(token + "=" * (-len(token) % 4), altchars=b"-_", validate=True)
        decoded = json.loads(raw, parse_float=_no_float, parse_constant=_no_float)
    except Exception as exc:  # binascii.Error, UnicodeDecodeError, JSONDecodeError, RecursionError...
        raise BadPageToken(f"bad page token {shown!r}") from exc
    if not (isinstance(decoded, list) and len(decoded) == 2):
        raise BadPageToken(f"bad page token {shown!r}: not a position")
    created_ms, match_id = decoded
    if type(created_ms) is not int or not 0 <= created_ms <= INT64_MAX:
        raise BadPageToken(f"bad page token {shown!r}: created time out of range")
    if not isinstance(match_id, str) or not 0 < len(match_id) <= MAX_MATCH_ID_CHARS or "\x00" in match_id \
            or not _utf8(match_id):
        raise BadPageToken(f"bad page token {shown!r}: not a match id")
    return created_ms, match_id


def _utf8(text: str) -> bool:
    """Whether `text` is UTF-8 text: JSON may escape a lone surrogate ("\\udc00"), which no
    database can be sent (the query would fail: INTERNAL instead of bad_page_token)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _no_float(text: str) -> float:
    raise ValueError(f"not a whole number: {text[:20]}")


def _page_size(size: int) -> int:
    return DEFAULT_PAGE if size <= 0 else min(size, MAX_PAGE)


# -- matches ------------------------------------------------------------------------------
def _summaries(session: Session, matches: Sequence[Match]) -> list[MatchSummary]:
    ids = [m.match_id for m in matches]
    seats: dict[str, list[MatchSeat]] = {i: [] for i in ids}
    if ids:
        for seat in session.exec(select(MatchSeat).where(col(MatchSeat.match_id).in_(ids))
                                 .order_by(col(MatchSeat.match_id), col(MatchSeat.seat))).all():
            seats[seat.match_id].append(seat)
    rematches = _rematches(session, ids)
    return [summary(m, seats[m.match_id], rematches.get(m.match_id, "")) for m in matches]


def _rematches(session: Session, ids: Sequence[str]) -> dict[str, str]:
    """match id -> its rematch, for those of `ids` that have one: a seek on `ix_matches_rematch_of`
    (the rematches only). The newest made when there are several, the one GetRematch names: a
    second rematch was made under new asks, whose request id is the one the command service
    reads (docs/architecture.md, "Rematches")."""
    if not ids:
        return {}
    rows = session.exec(select(Match.rematch_of, Match.created_ms, Match.match_id)
                        .where(col(Match.rematch_of).in_(ids))).all()
    newest: dict[str, str] = {}
    for of, _created, match_id in sorted(rows, key=lambda r: (r[1], r[2])):
        newest[str(of)] = match_id
    return newest


def summary(m: Match, seats: Sequence[MatchSeat], rematch_id: str = "") -> MatchSummary:
    return MatchSummary(
        match_id=m.match_id, game_id=m.game_id, status=m.status,
        seats=tuple(SeatSummary(s.seat, s.player_id, s.display_name, s.bot, s.policy, s.score, s.rank, s.winner,
                                dict(s.details), s.away, s.away_since) for s in sorted(seats, key=lambda s: s.seat)),
        created_ms=m.created_ms, finished_ms=m.finished_ms, last_event_ms=m.last_event_ms, version=m.version,
        seed=seed_from_db(m.seed) if m.status != "live" else None, options=dict(m.options),
        tournament_id=m.tournament_id, outcome=dict(m.outcome), rematch_of=m.rematch_of or "",
        rematch_id=rematch_id,
    )


def list_matches(session: Session, *, game_id: str = "", status: str = "", player_id: str = "",
                 tournament_id: str = "", page_size: int = 0, page_token: str = "") -> Page:
    """Newest first, filtered; `next_page_token` is "" on the last page.

    By player, the page is read from the player's seats in their order (`ix_match_seats_player`:
    player, created time, match id), each joined to its match: a seek, where finding every match
    of the player and sorting them cost as much as the player had played. A player in several
    seats of one match is read at their first seat only, so the match is listed once. The page
    token holds the seat's created time, the order's own: a seat written by a projection older
    than migration 0009 during a rolling deploy holds 0, not its match's, and a token of the
    match's time led the next page back over the matches before it."""
    size = _page_size(page_size)
    query = select(Match, col(Match.created_ms))
    order: tuple[Any, Any] = (Match.created_ms, Match.match_id)
    if player_id:
        other = aliased(MatchSeat)
        query = (select(Match, col(MatchSeat.created_ms)).select_from(MatchSeat)
                 .join(Match, col(Match.match_id) == col(MatchSeat.match_id))
                 .where(MatchSeat.player_id == player_id)
                 .where(~exists().where(col(other.match_id) == col(MatchSeat.match_id),
                                        col(other.player_id) == col(MatchSeat.player_id),
                                        col(other.seat) < col(MatchSeat.seat))))
        order = (MatchSeat.created_ms, MatchSeat.match_id)
    if game_id:
        query = query.where(Match.game_id == game_id)
    if status:
        query = query.where(Match.status == status)
    if tournament_id:
        query = query.where(Match.tournament_id == tournament_id)
    created, match = col(order[0]), col(order[1])
    if page_token:
        created_ms, match_id = decode_token(page_token)
        # `created <=` first: a bound the index seeks to, where the OR alone was checked on every
        # row from the newest down (page n read the n pages before it)
        query = query.where(created <= created_ms, or_(created < created_ms, match < match_id))
    query = query.order_by(created.desc(), match.desc()).limit(size + 1)
    rows = list(session.exec(query).all())
    more = len(rows) > size
    rows = rows[:size]
    token = encode_token(rows[-1][1], rows[-1][0].match_id) if more and rows else ""
    return Page(_summaries(session, [m for m, _created in rows]), token)


def has_game(session: Session, game_id: str) -> bool:
    """Whether any match of `game_id` is in the read models (one seek on ix_matches_game_status):
    they keep the matches of games this server no longer serves, archived without results."""
    if not game_id or len(game_id) > MAX_GAME_ID_CHARS:
        return False
    return session.exec(select(Match.match_id).where(Match.game_id == game_id).limit(1)).first() is not None


def match_summary(session: Session, match_id: str) -> MatchSummary | None:
    m = session.get(Match, match_id)
    return None if m is None else _summaries(session, [m])[0]


# -- ratings ------------------------------------------------------------------------------
def leaderboard(session: Session, game_id: str, *, limit: int = 0, offset: int = 0) -> list[LeaderboardEntry]:
    """A game's rated players, best first (ordinal, then mu, then player id)."""
    return scope_leaderboard(session, game_scope(game_id), limit=limit, offset=offset)


def scope_leaderboard(session: Session, scope: str, *, limit: int = 0, offset: int = 0) -> list[LeaderboardEntry]:
    query = (
        select(PlayerRating, Player)
        .join(Player, Player.player_id == PlayerRating.player_id, isouter=True)  # type: ignore[arg-type]
        .where(PlayerRating.scope == scope)
        .order_by(col(PlayerRating.ordinal).desc(), col(PlayerRating.mu).desc(), col(PlayerRating.player_id))
        .offset(max(0, offset)).limit(_page_size(limit))
    )
    return [_entry(offset + i, rating, player) for i, (rating, player) in enumerate(session.exec(query).all(), 1)]


def _entry(rank: int, rating: PlayerRating, player: Player | None) -> LeaderboardEntry:
    return LeaderboardEntry(
        rank=rank, player_id=rating.player_id, display_name=player.display_name if player else "",
        bot=bool(player and player.bot), policy=player.policy if player else "",
        mu=rating.mu, sigma=rating.sigma, ordinal=rating.ordinal, matches=rating.matches, wins=rating.wins,
    )


def player_ratings(session: Session, player_id: str) -> dict[str, LeaderboardEntry]:
    """game id -> the player's rating and rank there."""
    out: dict[str, LeaderboardEntry] = {}
    player = session.get(Player, player_id)
    rows = session.exec(select(PlayerRating).where(PlayerRating.player_id == player_id,
                                                   col(PlayerRating.scope).startswith("game:"))).all()
    for rating in rows:
        # Ranked as the leaderboard orders its rows (ordinal, then mu, then player id), so a tie
        # shows the same rank in both places.
        ahead = or_(col(PlayerRating.ordinal) > rating.ordinal,
                    and_(col(PlayerRating.ordinal) == rating.ordinal,
                         or_(col(PlayerRating.mu) > rating.mu,
                             and_(col(PlayerRating.mu) == rating.mu, col(PlayerRating.player_id) < rating.player_id))))
        better = session.exec(select(func.count()).select_from(PlayerRating).where(
            PlayerRating.scope == rating.scope, ahead)).one()
        out[rating.scope.removeprefix("game:")] = _entry(int(better) + 1, rating, player)
    return out


# -- players ------------------------------------------------------------------------------
def player_info(session: Session, player_id: str) -> PlayerInfo | None:
    p = session.get(Player, player_id)
    if p is None:
        return None
    return PlayerInfo(p.player_id, p.display_name, p.bot, p.policy, p.first_seen_ms, p.last_seen_ms)


def player_history(session: Session, player_id: str, *, game_id: str = "", page_size: int = 0,
                   page_token: str = "") -> PlayerHistory:
    """The player's matches, newest first, with their seat in each (the best one when they held
    several), and their ratings per game."""
    page = list_matches(session, game_id=game_id, player_id=player_id, page_size=page_size, page_token=page_token)
    history = {(h.scope, h.match_id): h for h in session.exec(select(RatingHistory).where(
        RatingHistory.player_id == player_id, col(RatingHistory.match_id).in_([m.match_id for m in page.matches]))).all()}
    entries = []
    for m in page.matches:
        rated = history.get((game_scope(m.game_id), m.match_id))
        before = Rating(rated.mu_before, rated.sigma_before) if rated else None
        after = Rating(rated.mu_after, rated.sigma_after) if rated else None
        # A player in several seats of one match played it once, at their best seat (the best rank,
        # then the lowest seat), as their rating and standings count it.
        seats = [s for s in m.seats if s.player_id == player_id]
        if seats:
            best = min(seats, key=lambda s: (s.rank is None, s.rank or 0, s.seat))
            entries.append(HistoryEntry(m, best.seat, before, after))
    return PlayerHistory(player_info(session, player_id), entries, player_ratings(session, player_id),
                         page.next_page_token)
