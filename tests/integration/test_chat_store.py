"""Match chat's store on a real redis-server, and the in-memory one held to the same rules: ids
that order the messages, the cap, idempotency records, the rate, the expiry, one slot a match,
and nothing written to the match's events."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import redis

from famiglia.eventstore.chat import ChatLimits, ChatStore, ChatTooFast, InMemoryChatStore, RedisChatStore
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.eventstore.port import entry_key
from famiglia.eventstore.redis_store import RedisEventStore
from services.command.chat import previous_id

MATCH = "m0123456789abcdef012"


@pytest.fixture(params=["redis", "memory"])
def chat(request: pytest.FixtureRequest, events: RedisEventStore) -> ChatStore:
    limits = ChatLimits(keep=10, ttl_ms=3_600_000, rate=0)
    if request.param == "memory":
        return InMemoryChatStore(limits)
    return RedisChatStore(events.client, events.keys, limits)


def test_messages_are_read_oldest_first_after_a_cursor_with_their_sender_recipients_and_time(
        chat: ChatStore) -> None:
    sent = [chat.send(MATCH, 0, "a", (), "to the table").entry, chat.send(MATCH, 2, "a", (0, 1), "é\nprivate").entry,
            chat.send(MATCH, 1, "b", (2,), "back").entry]
    assert [entry_key(e.id) for e in sent] == sorted(entry_key(e.id) for e in sent)
    assert len({e.id for e in sent}) == 3
    assert chat.read(MATCH) == sent
    assert chat.read(MATCH, sent[0].id) == sent[1:]
    assert chat.read(MATCH, sent[0].id, count=1) == sent[1:2]
    assert chat.read(MATCH, sent[2].id) == [] and chat.read("m-other") == []
    # a cursor past every id there can be (Redis refused the range: INTERNAL in ListChat)
    assert chat.read(MATCH, "18446744073709551615-18446744073709551615") == []
    assert (sent[1].from_seat, sent[1].to_seats, sent[1].text) == (2, (0, 1), "é\nprivate")
    assert all(e.sent_ms == entry_key(e.id)[0] > 0 for e in sent)


def test_the_newest_message_and_the_clock_the_next_id_is_made_from(chat: ChatStore) -> None:
    """What tells a reader's cursor no message has yet (`services.command.chat.check_cursor_reached`)."""
    assert chat.newest(MATCH)[0] == ""
    chat.send(MATCH, 0, "a", (), "first")
    last = chat.send(MATCH, 1, "b", (0,), "second").entry
    newest, now_ms = chat.newest(MATCH)
    assert newest == last.id
    # no id to come is before the clock (a message in the millisecond of the one before it, as
    # these two may be, has the next: so the newest may be ahead of the clock, never the next)
    assert chat.send(MATCH, 2, "c", (), "third").entry.sent_ms >= now_ms
    assert chat.newest("m-other")[0] == ""


def test_a_readers_ids_are_those_of_a_chat_without_the_messages_it_may_not_read(
        chat: ChatStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """A message's id counted the messages stored before it in its millisecond (`<ms>-<n>`), so
    a table message stored in the millisecond of a whisper between seats 0 and 1 came out
    `<ms>-1` with no `<ms>-0` anyone else could read: seat 2 and the spectators learnt that a
    private message was sent, and when. Each message has a millisecond of its own now: the ids
    a third seat reads are the ones a chat that never held the whisper gives the same table
    messages, sent when their ids say (a millisecond skipped is as common as a message)."""
    from famiglia.eventstore import chat as chat_module
    from services.command.chat import readable

    stood = 1_765_000_000_000  # the clock stands still: every message in one millisecond
    monkeypatch.setattr(chat_module.time, "time", lambda: stood / 1000)
    whispered, quiet = MATCH, "m0123456789abcdef013"

    def sends(match: str, whisper: bool) -> None:
        chat.send(match, 2, "hi", (), "hello table", now_ms=stood)
        if whisper:
            chat.send(match, 0, "psst", (1,), "a deal?", now_ms=stood)
        chat.send(match, 1, "t", (), "to the table", now_ms=stood)
        chat.send(match, 0, "u", (), "and again", now_ms=stood)

    sends(whispered, whisper=True)
    seen = [e for e in chat.read(whispered) if readable(e, 2)]
    assert [e.text for e in seen] == ["hello table", "to the table", "and again"]
    for e in seen:  # the same table messages, sent when their ids say, in a chat without the whisper
        chat.send(quiet, e.from_seat, f"again {e.id}", e.to_seats, e.text, now_ms=e.sent_ms)
    assert [e.id for e in chat.read(quiet)] == [e.id for e in seen]
    assert all(entry_key(e.id)[1] == 0 for e in seen), "a gap in a millisecond's count shows a hidden message"
    # and without the whisper, every one in the millisecond the clock said, or the next free one
    sends("m0123456789abcdef014", whisper=False)
    assert [entry_key(e.id) for e in chat.read("m0123456789abcdef014")] == [(stood + i, 0) for i in range(3)]


def test_ids_stored_before_each_message_had_its_own_millisecond_stay_cursors(events: RedisEventStore) -> None:
    """A chat stored when ids counted the messages of a millisecond (`<ms>-1`, `<ms>-2`) goes on:
    its ids are cursors of the command service's reads, and the next message comes after them."""
    from famiglia.config import Settings
    from services.command.app import Viewer
    from services.command.bootstrap import bootstrap

    app = bootstrap(store=events, settings=Settings(secret="chat-store-test"))
    match = app.create_match("grifters", 3).match_id
    seconds, micros = events.client.time()
    then = int(seconds) * 1000 + int(micros) // 1000  # this very millisecond: the next id is later
    key = events.keys.chat(match)
    for n, (sender, to, text) in enumerate([(0, "", "old 0"), (0, "1", "old whisper"), (1, "", "old 2")]):
        events.client.xadd(key, {"f": sender, "to": to, "t": text}, id=f"{then}-{n}")
    new = app.send_chat(match, Viewer(2), "m1", [], "new").message
    assert entry_key(new.id)[0] > then and entry_key(new.id)[1] == 0
    assert [m.text for m in app.list_chat(match, Viewer(2), after_id=f"{then}-0")] == ["old 2", "new"]
    assert [m.text for m in app.list_chat(match, Viewer(1), after_id=f"{then}-0")] == ["old whisper", "old 2", "new"]
    assert [m.text for m in app.list_chat(match, Viewer(2), after_id=f"{then}-2")] == ["new"]
    assert app.list_chat(match, Viewer(1), after_id=f"{then}-1")[0].text == "old 2"
    assert [m.text for m in app.chat_messages(match, Viewer(0), f"{then}-2", follow=False)] == ["new"]
    assert app.chat.read(match, previous_id(f"{then}-1"), 1)[0].text == "old whisper"
    assert app.send_chat(match, Viewer(2), "m1", [], "new").message == new  # a retry: its first answer


def test_a_chat_whose_newest_message_an_operator_deleted_takes_the_next_one(events: RedisEventStore) -> None:
    """An `XDEL` of the newest entry leaves the stream's last id where it was; a new id made from the
    newest entry left would be refused by `XADD` (an error for the sender, nothing stored)."""
    chat = RedisChatStore(events.client, events.keys, ChatLimits(keep=10, ttl_ms=3_600_000, rate=0))
    first = chat.send(MATCH, 0, "m1", [], "kept")
    seconds, _ = events.client.time()
    ahead = (int(seconds) + 60) * 1000  # a message stored a minute ahead of Redis's clock (old replica's now)
    key = events.keys.chat(MATCH)
    events.client.xadd(key, {"f": 1, "to": "", "t": "deleted"}, id=f"{ahead}-0")
    events.client.xdel(key, f"{ahead}-0")
    new = chat.send(MATCH, 2, "m2", [], "after the delete")
    assert entry_key(new.entry.id) == (ahead + 1, 0)
    assert [m.text for m in chat.read(MATCH, first.entry.id)] == ["after the delete"]


def test_a_chat_redis_refuses_past_maxmemory_is_its_refusal_and_writes_nothing(tmp_path) -> None:
    """A refused `XADD` (past maxmemory: OOM; a replica's READONLY and MISCONF alike) went on to
    `XINFO STREAM`, as for an id below the stream's last one, which on a match's first message
    (no stream yet) raised "no such key": a plain error (INTERNAL), not the store refusing for
    now (UNAVAILABLE `store_unavailable`, to be retried). Now any refusal but that one is
    answered as Redis gave it."""
    from famiglia.grpcutil.errors import store_refusing
    from famiglia.localstack.redis_server import RedisServer

    server = RedisServer(data_dir=tmp_path / "redis").start()  # its own: its memory bound is changed
    try:
        store = RedisEventStore.connect(server.url)
        admin = redis.Redis.from_url(server.url)
        chat = RedisChatStore(store.client, store.keys, ChatLimits(keep=10, ttl_ms=3_600_000, rate=0))
        kept = chat.send("m-old", 0, "m1", [], "kept").entry
        admin.config_set("maxmemory-policy", "noeviction")
        admin.config_set("maxmemory", 1)
        try:
            for match in ("m-new", "m-old"):  # its first message; a next one
                with pytest.raises(redis.ResponseError) as refused:
                    chat.send(match, 0, "m2", [], "refused")
                assert store_refusing(refused.value), refused.value
        finally:
            admin.config_set("maxmemory", 0)
        assert chat.read("m-new") == [] and chat.read("m-old") == [kept]
        assert chat.send("m-new", 0, "m2", [], "once there is room").entry.text == "once there is room"
        store.close()
        admin.close()
    finally:
        server.stop()


def test_a_message_is_read_by_its_own_id_from_the_id_just_below_it(chat: ChatStore) -> None:
    """How the command service reads the newest message to see who may read it
    (`services.command.chat.previous_id`): the greatest id below a `<ms>-0` is `<ms-1>-(2**64-1)`,
    which Redis takes as an exclusive start."""
    sent = [chat.send(MATCH, 0, "a", (), "first").entry, chat.send(MATCH, 1, "b", (2,), "second").entry]
    for entry in sent:
        assert chat.read(MATCH, previous_id(entry.id), 1) == [entry]
    ms, seq = entry_key(sent[0].id)
    assert previous_id(f"{ms}-0") == f"{ms - 1}-{2**64 - 1}" and previous_id(f"{ms}-{seq + 3}") == f"{ms}-{seq + 2}"
    assert previous_id("0-0") == "" and chat.read(MATCH, previous_id(f"{ms}-0"), 1)[0].id == sent[0].id


def test_a_message_id_seen_before_answers_the_first_message_and_writes_nothing(chat: ChatStore) -> None:
    first = chat.send(MATCH, 0, "m1", (1,), "first")
    again = chat.send(MATCH, 0, "m1", (), "another text")  # the caller compares and refuses it
    assert not first.duplicate and again.duplicate and again.entry == first.entry
    assert not chat.send(MATCH, 1, "m1", (), "another seat's m1").duplicate
    assert len(chat.read(MATCH)) == 2


def test_racing_sends_of_one_message_id_store_it_once(chat: ChatStore) -> None:
    barrier, results = threading.Barrier(6), []

    def send() -> None:
        barrier.wait()
        results.append(chat.send(MATCH, 0, "race", (), "once"))

    threads = [threading.Thread(target=send) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.duplicate for r in results) == [False] + [True] * 5
    assert len({r.entry for r in results}) == 1 and len(chat.read(MATCH)) == 1


def test_a_seat_over_its_rate_gets_the_wait_and_nothing_stored(chat: ChatStore) -> None:
    chat.limits = ChatLimits(keep=10, ttl_ms=3_600_000, rate=2, window_ms=10_000)
    chat.send(MATCH, 0, "a", (), "one", now_ms=1_000)
    chat.send(MATCH, 0, "b", (), "two", now_ms=4_000)
    with pytest.raises(ChatTooFast) as raised:
        chat.send(MATCH, 0, "c", (), "three", now_ms=9_000)
    assert raised.value.wait_ms == 2_000  # the older of the two leaves the window at 11,000
    assert chat.send(MATCH, 0, "a", (), "one", now_ms=9_000).duplicate  # a retry is no new message
    chat.send(MATCH, 1, "c", (), "another seat", now_ms=9_000)
    chat.send(MATCH, 0, "c", (), "three", now_ms=11_000)
    with pytest.raises(ChatTooFast):
        chat.send(MATCH, 0, "d", (), "four", now_ms=11_500)
    assert [e.text for e in chat.read(MATCH)] == ["one", "two", "another seat", "three"]


def test_a_match_keeps_about_its_newest_messages(chat: ChatStore) -> None:
    """MAXLEN ~ trims whole nodes of the stream (100 entries by default): at most a node more."""
    for i in range(350):
        chat.send(MATCH, i % 3, f"m{i}", (), f"message {i}")
    kept = chat.read(MATCH, count=1000)
    assert 10 <= len(kept) <= 10 + 100
    assert [e.text for e in kept[-10:]] == [f"message {i}" for i in range(340, 350)]


def test_a_waiting_reader_gets_the_next_message_and_one_sent_before_it_waited(chat: ChatStore) -> None:
    first = chat.send(MATCH, 0, "a", (), "before").entry
    assert chat.wait(MATCH, "", 5_000) == [first]  # stored before the wait: at once
    got: list[list] = []
    reader = threading.Thread(target=lambda: got.append(chat.wait(MATCH, first.id, 20_000)))
    reader.start()
    second = chat.send(MATCH, 1, "a", (), "after").entry
    reader.join()
    assert got == [[second]]


def test_chat_shares_its_matchs_slot_expires_after_its_last_message_and_is_no_event(
        events: RedisEventStore) -> None:
    chat = RedisChatStore(events.client, events.keys, ChatLimits(ttl_ms=60_000, rate=5, window_ms=10_000))
    chat.send(MATCH, 0, "m1", (), "hi")
    keys = events.keys
    names = [keys.chat(MATCH), keys.chat_message(MATCH, 0, "m1"), keys.chat_sends(MATCH, 0)]
    tag = keys.tag(keys.partition_of(MATCH))
    assert all(tag in name and name.index(tag) == keys.match_stream(MATCH).index(tag) for name in names)
    client: redis.Redis = events.client
    assert all(0 < client.pttl(name) <= 60_000 for name in names[:2])
    assert 0 < client.pttl(names[2]) <= 10_000
    client.pexpire(names[0], 5_000)
    chat.send(MATCH, 1, "m2", (), "again")
    assert client.pttl(names[0]) > 5_000  # each message refreshes the expiry
    assert events.version(MATCH) == 0 and events.read(MATCH) == []
    assert all(not client.xlen(p) for p in events.partitions_keys() if client.exists(p))


def test_a_trimmed_match_takes_its_chat_with_it_and_a_messages_record_outlives_no_retry(
        events: RedisEventStore) -> None:
    """Private messages are not kept past their use: an archived match's trim drops its chat
    stream (nobody can read a trimmed match's chat, and no export keeps it), and a message's
    idempotency record, which holds its text too, lives a day (`RECORD_TTL_MS`), not the
    chat's 30."""
    from famiglia.eventstore.chat import RECORD_TTL_MS
    from tests.contracts.eventstore_contract import batch, new_match_id

    match = new_match_id()
    events.append(match, 0, batch(match, 0, 2), command_id="c1")
    chat = RedisChatStore(events.client, events.keys, ChatLimits(ttl_ms=30 * 86_400_000, rate=0))
    chat.send(match, 1, "m1", (0,), "a private word")
    record = events.keys.chat_message(match, 1, "m1")
    assert 0 < events.client.pttl(record) <= RECORD_TTL_MS
    assert events.client.pttl(events.keys.chat(match)) > RECORD_TTL_MS
    assert events.trim(match) == 2
    assert not events.client.exists(events.keys.chat(match))
    assert chat.read(match) == []


@pytest.mark.parametrize("skew_ms", [3_600_000, -3_600_000])
def test_the_rate_window_runs_on_redis_clock_whatever_the_replicas_clocks(
        events: RedisEventStore, monkeypatch: pytest.MonkeyPatch, skew_ms: int) -> None:
    """Each command replica timed a seat's sends with its own clock: a seat that talked through
    a replica an hour ahead was told by another to wait an hour, and through one an hour behind
    it sent past its rate on another."""
    from famiglia.eventstore import chat as chat_module

    chat = RedisChatStore(events.client, events.keys, ChatLimits(rate=2, window_ms=10_000))
    true_time = chat_module.time.time
    monkeypatch.setattr(chat_module.time, "time", lambda: true_time() + skew_ms / 1000)  # one replica's clock
    chat.send(MATCH, 0, "a", (), "one")
    chat.send(MATCH, 0, "b", (), "two")
    monkeypatch.setattr(chat_module.time, "time", true_time)  # another replica's
    with pytest.raises(ChatTooFast) as raised:
        chat.send(MATCH, 0, "c", (), "three")
    assert 0 < raised.value.wait_ms <= 10_000
    assert [e.text for e in chat.read(MATCH)] == ["one", "two"]


@pytest.fixture(params=["redis", "memory"])
def trimming(request: pytest.FixtureRequest, events: RedisEventStore) -> tuple[Any, ChatStore]:
    """An event store that trims, and the chat bound to it: Redis's scripts, or the in-memory
    stores bound as `services.command.bootstrap` binds them."""
    limits = ChatLimits(rate=1)
    if request.param == "memory":
        store = InMemoryEventStore()
        return store, InMemoryChatStore(limits, store=store)
    return events, RedisChatStore(events.client, events.keys, limits)


def test_a_trimmed_match_takes_no_new_chat(trimming: tuple[Any, ChatStore]) -> None:
    """A command replica that still holds an archived match in memory took its chat after the
    trim, and so kept a private message, and its record, for the chat's 30 days: nobody could
    read them (the match is archived), nothing would drop them. (The in-memory store took it all
    the same, and kept the chat past the trim: unit tests could not see the refusal.)"""
    from famiglia.eventstore.chat import MatchArchived
    from tests.contracts.eventstore_contract import batch, new_match_id

    events, chat = trimming
    match = new_match_id()
    events.append(match, 0, batch(match, 0, 2), command_id="c1")
    first = chat.send(match, 1, "m1", (0,), "before the trim")
    events.trim(match)
    assert chat.read(match) == []  # the chat went with the trim
    with pytest.raises(MatchArchived):
        chat.send(match, 1, "m2", (0,), "a private word after it")
    assert chat.send(match, 1, "m1", (0,), "before the trim").entry == first.entry  # a retry still answers
    assert chat.read(match) == [] and chat.newest(match)[0] == ""
    other = new_match_id()  # a match not trimmed takes its chat
    events.append(other, 0, batch(other, 0, 1))
    assert chat.send(other, 0, "m1", (), "gg").entry.text == "gg"
    if isinstance(events, RedisEventStore):
        keys = events.keys
        assert not events.client.exists(keys.chat(match), keys.chat_message(match, 1, "m2"))


def test_a_replica_holding_an_archived_match_refuses_its_chat_as_archived(trimming: tuple[Any, ChatStore]) -> None:
    """The command service's answer (`match_archived`), on Redis and with its in-memory stores."""
    from famiglia.config import Settings
    from famiglia.grpcutil.errors import NotFound
    from services.command.app import Viewer
    from services.command.bootstrap import bootstrap

    events, _chat = trimming
    app = bootstrap(store=events, settings=Settings(secret="chat-store-test"))
    match = app.create_match("grifters", 3).match_id
    app.send_chat(match, Viewer(0), "m1", [], "gg")  # the match is in this replica's memory
    events.trim(match)
    with pytest.raises(NotFound) as raised:
        app.send_chat(match, Viewer(1), "m1", [0], "a private word after the trim")
    assert raised.value.code == "match_archived"
    assert app.chat.read(match) == []
    if isinstance(events, RedisEventStore):
        assert not events.client.exists(events.keys.chat(match))
