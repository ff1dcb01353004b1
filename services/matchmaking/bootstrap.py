"""The composition root of the matchmaking service: nothing connects at import time."""

from __future__ import annotations

from dataclasses import dataclass, replace

import redis

from famiglia.config import Settings
from famiglia.engine.registry import Registry, default_registry
from famiglia.matchmaking import GameShape, RatingProvider
from famiglia.matchmaking.shapes import games_of
from famiglia.redis_clients import connect as connect_redis

from .app import Clock, MatchmakingApp, system_clock
from .creator import CREATE_TIMEOUT_S, GrpcMatchCreator, MatchCreator
from .matcher import Matcher
from .players import RedisPlayers
from .ratings import projection_ratings
from .settings import MatchmakingSettings
from .store import RedisTicketStore


@dataclass
class Matchmaking:
    """The request side (app) and the matcher loop, sharing one store."""

    app: MatchmakingApp
    matcher: Matcher
    settings: MatchmakingSettings

    def close(self) -> None:
        self.app.store.close()
        close = getattr(self.matcher.creator, "close", None)
        if close is not None:
            close()



def check_bot_policy(spec: str) -> None:
    """Refuse at start-up a backfill policy the bots service would refuse for every seat:
    an unknown name or a parameter out of its bounds."""
    try:
        from famiglia.bots.policy import POLICY_NAMES, PolicySpec, make_policy
    except ImportError:  # no bots library installed: nothing to check against
        return
    name = PolicySpec.parse(spec).name
    if name not in POLICY_NAMES:
        raise ValueError(f"FAMIGLIA_MM_BOT_POLICY={spec!r}: no bot policy {name!r}; known: {', '.join(POLICY_NAMES)}")
    try:
        make_policy(spec)
    except ValueError as exc:
        raise ValueError(f"FAMIGLIA_MM_BOT_POLICY={spec!r}: {exc}") from None


def bootstrap(*, settings: Settings | None = None, mm: MatchmakingSettings | None = None,
              client: redis.Redis | None = None, creator: MatchCreator | None = None,
              games: dict[str, GameShape] | None = None, registry: Registry | None = None,
              ratings: RatingProvider | None = None, clock: Clock | None = None) -> Matchmaking:
    settings = settings or Settings.from_env()
    mm = mm or MatchmakingSettings.from_env()
    check_bot_policy(mm.policy.bot_policy)
    client = client or connect_redis(settings.redis_url, decode_responses=True)  # follows a failover
    store = RedisTicketStore(client)
    players = RedisPlayers(client, mm.guest_ttl_s)
    if games is None:
        games = games_of(registry or default_registry())
    clock = clock or system_clock
    app = MatchmakingApp(store=store, players=players, signer=settings.signer(), games=games,
                         ratings=ratings or projection_ratings(settings.database_url), policy=mm.policy,
                         clock=clock)
    tuning = mm.tuning
    if creator is None:
        creator = GrpcMatchCreator(settings.command_addr, timeout=CREATE_TIMEOUT_S, secret=settings.secret,
                                   accepted_secret=settings.accepted_secret)
        # A claim is not retried by another replica while its CreateMatch may still be out.
        tuning = replace(tuning, create_timeout_ms=int(CREATE_TIMEOUT_S * 1000))
    matcher = Matcher(store=store, players=players, creator=creator,
                      games=games, policy=mm.policy, clock=clock, tuning=tuning, secret=settings.secret)
    return Matchmaking(app, matcher, mm)
