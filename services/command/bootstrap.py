"""The composition root of the command service: nothing connects at import time."""

from __future__ import annotations

import os
from dataclasses import dataclass

from famiglia.bots.policy import BadPolicyParameter, UnknownPolicy, checked_spec
from famiglia.config import Settings, flag, number, whole
from famiglia.engine.registry import Registry, default_registry
from famiglia.eventstore import EventStore
from famiglia.eventstore.chat import ChatStore, InMemoryChatStore
from famiglia.eventstore.player_matches import InMemoryPlayerMatches, PlayerMatches
from famiglia.eventstore.rematch_asks import InMemoryRematchAsks, RematchAsksStore
from famiglia.eventstore.turn_notices import turn_notices_of

from .app import CLOCK_SKEW_S, LEAVE_POLICY, TIMEOUTS_TO_BOT, CommandApp
from .chat import ChatSettings
from .hot_matches import HOT_MATCHES, HOT_MATCHES_MB
from .quarantine import QUARANTINE_S, Quarantine


@dataclass(frozen=True)
class CommandSettings:
    """The command service's own knobs, beside the shared Settings: the hot matches' bounds, by
    count and by the MiB they hold (docs/architecture.md); after how many turn clocks run out in a
    row the bots take a person's seat (0: never), and the bot policy that plays a seat its player
    left (README, "Playing a match as a client"); whether seats change hands at all (off while a
    release that writes `seat_left` rolls out over one that cannot read it, docs/operations.md); how
    long before a person's deadline its clock default is taken (other hosts' clocks may run that far
    ahead: docs/bots.md, "Turn clocks")."""

    hot_matches: int = HOT_MATCHES
    hot_matches_mb: int = HOT_MATCHES_MB
    timeouts_to_bot: int = TIMEOUTS_TO_BOT
    leave_policy: str = LEAVE_POLICY
    seat_changes: bool = True
    clock_skew_s: float = CLOCK_SKEW_S
    quarantine_s: float = QUARANTINE_S
    """Seconds a command whose engine did not return stays refused on every replica
    (FAMIGLIA_COMMAND_QUARANTINE_S; `quarantine`)."""
    turn_notifications: bool = True
    """Whether a rematch's asks and its making are posted to the players' notification streams
    (FAMIGLIA_TURN_NOTIFICATIONS, the dispatcher's switch for the turns' own)."""

    @classmethod
    def from_env(cls) -> CommandSettings:
        return cls(
            hot_matches=whole("FAMIGLIA_HOT_MATCHES", HOT_MATCHES),
            hot_matches_mb=whole("FAMIGLIA_HOT_MATCHES_MB", HOT_MATCHES_MB),
            timeouts_to_bot=_timeouts_to_bot(),
            leave_policy=_leave_policy(),
            seat_changes=flag("FAMIGLIA_SEAT_CHANGES", True),
            clock_skew_s=number("FAMIGLIA_CLOCK_SKEW_S", CLOCK_SKEW_S),
            turn_notifications=flag("FAMIGLIA_TURN_NOTIFICATIONS", True),
            quarantine_s=number("FAMIGLIA_COMMAND_QUARANTINE_S", QUARANTINE_S, above=True),
        )


def _timeouts_to_bot() -> int:
    """FAMIGLIA_TIMEOUTS_TO_BOT: a whole number, 0 or `off` for never (blank: the default)."""
    if os.environ.get("FAMIGLIA_TIMEOUTS_TO_BOT", "").strip().lower() == "off":
        return 0
    return whole("FAMIGLIA_TIMEOUTS_TO_BOT", TIMEOUTS_TO_BOT, low=0)


def _leave_policy() -> str:
    """FAMIGLIA_LEAVE_POLICY: a bot policy spec the bots play (blank: the default); checked at
    start, not when the first player leaves and its seat finds no bot to play it."""
    text = os.environ.get("FAMIGLIA_LEAVE_POLICY", "").strip()
    if not text:
        return LEAVE_POLICY
    try:
        checked_spec(text)
    except (UnknownPolicy, BadPolicyParameter) as exc:
        raise SystemExit(f"FAMIGLIA_LEAVE_POLICY={text!r}: {exc}") from None
    return text


def bootstrap(*, store: EventStore | None = None, registry: Registry | None = None,
              settings: Settings | None = None, command_settings: CommandSettings | None = None,
              chat: ChatSettings | None = None) -> CommandApp:
    settings = settings or Settings.from_env()
    command_settings = command_settings or CommandSettings.from_env()
    chat = chat or ChatSettings.from_env()
    if store is None:
        from famiglia.eventstore.redis_store import RedisEventStore

        store = RedisEventStore.connect(settings.redis_url, partitions=settings.partitions)
    return CommandApp(store=store, registry=registry or default_registry(),
                      signer=settings.signer(), chat=_chat_store(store, chat),
                      hot_matches=command_settings.hot_matches, hot_bytes=command_settings.hot_matches_mb << 20,
                      players=_player_matches(store), timeouts_to_bot=command_settings.timeouts_to_bot,
                      leave_policy=command_settings.leave_policy, notices=turn_notices_of(store),
                      rematch_notices=command_settings.turn_notifications,
                      rematches=_rematch_asks(store), seat_changes=command_settings.seat_changes,
                      clock_skew_s=command_settings.clock_skew_s,
                      quarantine=_quarantine(store, command_settings.quarantine_s))


def _quarantine(store: EventStore, ttl_s: float) -> Quarantine:
    """Commands set aside on the event store's Redis, which every replica reads; in memory
    beside an in-memory store."""
    from famiglia.eventstore.redis_store import RedisEventStore

    if isinstance(store, RedisEventStore):
        return Quarantine(store.client, prefix=store.keys.prefix, ttl_s=ttl_s)
    return Quarantine(ttl_s=ttl_s)


def _chat_store(store: EventStore, chat: ChatSettings) -> ChatStore:
    """Match chat beside the matches: on the event store's Redis and key layout (one slot with
    its match), or in memory beside an in-memory store, bound to it (its trim takes a match's chat,
    and a trimmed match takes no message, as on Redis)."""
    from famiglia.eventstore.redis_store import RedisEventStore

    if isinstance(store, RedisEventStore):
        from famiglia.eventstore.chat import RedisChatStore

        return RedisChatStore(store.client, store.keys, chat.limits)
    from famiglia.eventstore.memory_store import InMemoryEventStore

    return InMemoryChatStore(chat.limits, store=store if isinstance(store, InMemoryEventStore) else None)


def _rematch_asks(store: EventStore) -> RematchAsksStore:
    """Finished matches' rematch asks beside their matches: on the event store's Redis and key
    layout (the match's slot), or in memory beside an in-memory store, bound to it (the asks
    refuse a match it trimmed, its trim a match whose rematch is pending, as on Redis)."""
    from famiglia.eventstore.memory_store import InMemoryEventStore
    from famiglia.eventstore.redis_store import RedisEventStore

    if isinstance(store, RedisEventStore):
        from famiglia.eventstore.rematch_asks import RedisRematchAsks

        return RedisRematchAsks(store.client, store.keys)
    return InMemoryRematchAsks(store=store if isinstance(store, InMemoryEventStore) else None)


def _player_matches(store: EventStore) -> PlayerMatches:
    """Players' live matches (ListMyTurns) beside the matches: on the event store's Redis and key
    layout, or in memory beside an in-memory store."""
    from famiglia.eventstore.redis_store import RedisEventStore

    if isinstance(store, RedisEventStore):
        from famiglia.eventstore.player_matches import RedisPlayerMatches

        return RedisPlayerMatches(store.client, store.keys)
    return InMemoryPlayerMatches()
