"""The composition root of the command service: nothing connects at import time."""

from __future__ import annotations

from dataclasses import dataclass

from famiglia.config import Settings, whole
from famiglia.engine.registry import Registry, default_registry
from famiglia.eventstore import EventStore
from famiglia.eventstore.chat import ChatStore, InMemoryChatStore
from famiglia.eventstore.player_matches import InMemoryPlayerMatches, PlayerMatches

from .app import CommandApp
from .chat import ChatSettings
from .hot_matches import HOT_MATCHES, HOT_MATCHES_MB


@dataclass(frozen=True)
class CommandSettings:
    """The command service's own knobs, beside the shared Settings: the hot matches' bounds, by
    count and by the MiB they hold (docs/architecture.md)."""

    hot_matches: int = HOT_MATCHES
    hot_matches_mb: int = HOT_MATCHES_MB

    @classmethod
    def from_env(cls) -> CommandSettings:
        return cls(
            hot_matches=whole("FAMIGLIA_HOT_MATCHES", HOT_MATCHES),
            hot_matches_mb=whole("FAMIGLIA_HOT_MATCHES_MB", HOT_MATCHES_MB),
        )


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
                      players=_player_matches(store))


def _chat_store(store: EventStore, chat: ChatSettings) -> ChatStore:
    """Match chat beside the matches: on the event store's Redis and key layout (one slot with
    its match), or in memory beside an in-memory store."""
    from famiglia.eventstore.redis_store import RedisEventStore

    if isinstance(store, RedisEventStore):
        from famiglia.eventstore.chat import RedisChatStore

        return RedisChatStore(store.client, store.keys, chat.limits)
    return InMemoryChatStore(chat.limits)


def _player_matches(store: EventStore) -> PlayerMatches:
    """Players' live matches (ListMyTurns) beside the matches: on the event store's Redis and key
    layout, or in memory beside an in-memory store."""
    from famiglia.eventstore.redis_store import RedisEventStore

    if isinstance(store, RedisEventStore):
        from famiglia.eventstore.player_matches import RedisPlayerMatches

        return RedisPlayerMatches(store.client, store.keys)
    return InMemoryPlayerMatches()
