"""The composition root of the command service: nothing connects at import time."""

from __future__ import annotations

from famiglia.config import Settings
from famiglia.engine.registry import Registry, default_registry
from famiglia.eventstore import EventStore
from famiglia.eventstore.chat import ChatStore, InMemoryChatStore

from .app import CommandApp
from .chat import ChatSettings


def bootstrap(*, store: EventStore | None = None, registry: Registry | None = None,
              settings: Settings | None = None, chat: ChatSettings | None = None) -> CommandApp:
    settings = settings or Settings.from_env()
    chat = chat or ChatSettings.from_env()
    if store is None:
        from famiglia.eventstore.redis_store import RedisEventStore

        store = RedisEventStore.connect(settings.redis_url, partitions=settings.partitions)
    return CommandApp(store=store, registry=registry or default_registry(),
                      signer=settings.signer(), chat=_chat_store(store, chat))


def _chat_store(store: EventStore, chat: ChatSettings) -> ChatStore:
    """Match chat beside the matches: on the event store's Redis and key layout (one slot with
    its match), or in memory beside an in-memory store."""
    from famiglia.eventstore.redis_store import RedisEventStore

    if isinstance(store, RedisEventStore):
        from famiglia.eventstore.chat import RedisChatStore

        return RedisChatStore(store.client, store.keys, chat.limits)
    return InMemoryChatStore(chat.limits)
