"""Match chat's use cases (in-memory stores, real bootstrap and games): what a seat may send,
who reads what, idempotent retries, the rate, and the games whose engine has its own chat."""

from __future__ import annotations

import re

import pytest

from famiglia.config import Settings
from famiglia.engine.registry import default_registry
from famiglia.eventstore.chat import ChatEntry, ChatLimits
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.eventstore.port import entry_key
from famiglia.grpcutil.errors import (
    Aborted,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
)
from services.command import chat
from services.command.app import CommandApp, Viewer
from services.command.bootstrap import bootstrap

SETTINGS = Settings(secret="unit-test-secret")
REGISTRY = default_registry()


@pytest.fixture()
def store() -> InMemoryEventStore:
    return InMemoryEventStore()


@pytest.fixture()
def app(store: InMemoryEventStore) -> CommandApp:
    return bootstrap(store=store, registry=REGISTRY, settings=SETTINGS,
                     chat=chat.ChatSettings(ChatLimits(rate=0)))


def _table(app: CommandApp, game_id: str = "grifters", seats: int = 4) -> str:
    return app.create_match(game_id, seats, seed=5).match_id


def _code(raised: pytest.ExceptionInfo) -> tuple[type, str]:
    return type(raised.value), raised.value.code


# -- the rules, pure ---------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "stored"), [
    ("  hello  ", "hello"), ("two\nlines", "two\nlines"), ("x" * 500, "x" * 500), ("\n  é 🎲 \n", "é 🎲"),
    (" " + "y" * 500 + "\n", "y" * 500),  # the limit counts the trimmed text
    ("deal?\r\nyes\r\n", "deal?\nyes"),  # a phone keyboard's line ends are newlines
    ("e\u0301\u200b", "e\u0301\u200b"),  # invisible characters beside a visible one stay
])
def test_a_text_is_stored_trimmed(text: str, stored: str) -> None:
    assert chat.check_text(text) == stored


@pytest.mark.parametrize(("text", "code"), [
    ("", "no_text"), ("   \n\t ", "no_text"), ("x" * 501, "bad_text"), ("a\rb", "bad_text"), ("a\x00b", "bad_text"),
    ("a\x1b[2Jb", "bad_text"), ("tab\there", "bad_text"), ("a\x85b", "bad_text"),
    ("\u200b\ufeff", "no_text"), ("\u2060\n\u200d", "no_text"), ("\u0301\u3000", "no_text"),  # shows nothing
])
def test_a_text_empty_too_long_or_holding_a_control_character_is_refused(text: str, code: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        chat.check_text(text)
    assert raised.value.code == code


@pytest.mark.parametrize("char", [*map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x2070)),
                                  "\ufff9", "\ufffa", "\ufffb"])
def test_a_text_holding_a_character_that_reorders_or_hides_the_text_after_it_is_refused(char: str) -> None:
    """An RLO (U+202E) or an unclosed isolate in one message reversed how a client showed what
    followed it on the line: the next sender's name, another player's words."""
    with pytest.raises(InvalidArgument) as raised:
        chat.check_text(f"gg {char}wp")
    assert raised.value.code == "bad_text" and f"U+{ord(char):04X}" in raised.value.message


@pytest.mark.parametrize("text", [
    "\U0001f469\u200d\U0001f4bb",  # an emoji sequence: the zero width joiner
    "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",  # Persian spelling: the zero width non-joiner
    "\u05e9\u05dc\u05d5\u05dd 3\u200f!", "abc\u200e \u061c\u0627",  # direction marks open no scope
    "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",  # Scotland's flag: tags
    "co\u00adop\u2060x",  # soft hyphen, word joiner
])
def test_format_characters_that_open_no_scope_stay_in_a_text(text: str) -> None:
    assert chat.check_text(text) == text


@pytest.mark.parametrize("text", [
    "\u3164", "\u2800\u2800", "\u115f\u1160", "\uffa0 \U0001d159", "\u3164\n\u2800\u200b", "\u180e\u3164",
])
def test_a_text_of_blank_fillers_alone_shows_nothing(text: str) -> None:
    """The Hangul fillers and the Braille blank are letters and symbols by their categories: a
    message of nothing else passed as text and showed as an empty line."""
    with pytest.raises(InvalidArgument) as raised:
        chat.check_text(text)
    assert raised.value.code == "no_text"


@pytest.mark.parametrize("text", ["\u1100\u1160", "\u2800\u2801", "ok \u3164"])
def test_blank_fillers_beside_visible_text_stay(text: str) -> None:
    """A jamo with its filler is Korean spelling; a braille pattern beside the blank, braille."""
    assert chat.check_text(text) == text


@pytest.mark.parametrize("text", ["gg \ud800", "\udfff", "a\udc00b"])
def test_a_text_holding_a_lone_surrogate_is_refused(text: str) -> None:
    """No character: a text that is not UTF-8 (gRPC refuses it in a request; a caller in
    process may not), which the chat store cannot write."""
    with pytest.raises(InvalidArgument) as raised:
        chat.check_text(text)
    assert raised.value.code == "bad_text" and "surrogate" in raised.value.message


@pytest.mark.parametrize(("to_seats", "stored"), [((), ()), ((2, 1), (1, 2)), ((0, 3), (0, 3)), ((1,), (1,))])
def test_recipients_are_stored_in_seat_order(to_seats: tuple[int, ...], stored: tuple[int, ...]) -> None:
    assert chat.check_recipients(to_seats, 0, 4) == stored


@pytest.mark.parametrize("to_seats", [(4,), (-1,), (1, 1), (0,), (2, 2, 0), (2**31 - 1,)])
def test_recipients_outside_the_table_twice_or_the_sender_alone_are_refused(to_seats: tuple[int, ...]) -> None:
    with pytest.raises(InvalidArgument) as raised:
        chat.check_recipients(to_seats, 0, 4)
    assert raised.value.code == "bad_to_seats"


@pytest.mark.parametrize(("message_id", "code"), [("", "no_message_id"), ("x" * 129, "bad_message_id"),
                                                  ("a\x00b", "bad_message_id")])
def test_a_message_id_is_required_bounded_and_without_nul(message_id: str, code: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        chat.check_message_id(message_id)
    assert raised.value.code == code


@pytest.mark.parametrize("after_id", ["x", "1", "1-", "-1", "1-2-3", "1.5-0", " 1-0", "18446744073709551616-0",
                                      "0-18446744073709551616", "1" * 21 + "-0"])
def test_a_cursor_that_is_no_message_id_is_refused(after_id: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        chat.check_cursor(after_id)
    assert raised.value.code == "bad_after_id"


@pytest.mark.parametrize("after_id", ["", "0-0", "1796621593263-7", "18446744073709551615-18446744073709551615"])
def test_a_cursor_is_empty_or_a_message_id(after_id: str) -> None:
    assert chat.check_cursor(after_id) == after_id


@pytest.mark.parametrize(("after_id", "newest", "now_ms"), [
    ("9000-0", "", 5000), ("9000-0", "4000-3", 5000), ("5000-0", "4000-3", 5000),  # no message has it yet
    ("7000-0", "6000-0", 5000),  # the clock went back: the next id is 6000-1, past the newest, not the clock
])
def test_a_cursor_past_the_newest_message_and_the_clock_is_refused(after_id: str, newest: str, now_ms: int) -> None:
    with pytest.raises(InvalidArgument) as raised:
        chat.check_cursor_reached(after_id, newest, now_ms)
    assert raised.value.code == "bad_after_id"


@pytest.mark.parametrize(("after_id", "newest", "now_ms"), [
    ("", "", 5000), ("4000-3", "4000-3", 5000), ("3000-0", "4000-3", 5000),
    ("4500-0", "4000-3", 5000), ("4500-0", "", 5000),  # past the newest kept (expired, went back): behind the clock
    ("5500-0", "6000-0", 5000),  # ahead of a clock that went back, not of the newest message
])
def test_a_cursor_a_message_may_have_or_behind_the_clock_is_taken(after_id: str, newest: str, now_ms: int) -> None:
    """Every message to come gets an id past such a cursor: none is skipped."""
    chat.check_cursor_reached(after_id, newest, now_ms)


def test_a_private_message_is_read_by_its_sender_and_recipients_only() -> None:
    private, table = ChatEntry("1-0", 0, (2,), "psst", 1), ChatEntry("2-0", 1, (), "hi all", 2)
    assert [s for s in (None, 0, 1, 2, 3) if chat.readable(private, s)] == [0, 2]
    assert [s for s in (None, 0, 1, 2, 3) if chat.readable(table, s)] == [None, 0, 1, 2, 3]


def test_only_nothing_personal_keeps_its_chat_in_the_engine_and_names_a_command_it_has() -> None:
    """The one place the fact is declared (`GameInfo.engine_chat`) names a kind of the game's
    Command: the refusal tells a client which command to send."""
    with_engine_chat = {e.info.game_id: e.info.engine_chat for e in REGISTRY.engines() if e.info.engine_chat}
    assert with_engine_chat == {"nothing_personal": "send_chat"}
    command = REGISTRY.get("nothing_personal").info.command_type
    assert command.DESCRIPTOR.fields_by_name["send_chat"].containing_oneof.name == "kind"


# -- the use cases ----------------------------------------------------------------------------
def test_table_and_private_messages_are_listed_oldest_first_to_whoever_may_read_them(app: CommandApp) -> None:
    match_id = _table(app)
    hello = app.send_chat(match_id, Viewer(0), "m1", [], " hello table ").message
    psst = app.send_chat(match_id, Viewer(1), "m1", [3, 2], "psst").message  # another seat's "m1" is its own
    answer = app.send_chat(match_id, Viewer(3), "m2", [1], "ok").message
    assert (hello.text, hello.from_seat, hello.to_seats) == ("hello table", 0, ())
    assert psst.to_seats == (2, 3)
    assert entry_key(hello.id) < entry_key(psst.id) < entry_key(answer.id)  # ids order the messages
    seen = {seat: [m.text for m in app.list_chat(match_id, Viewer(seat))] for seat in (None, 0, 1, 2, 3)}
    assert seen == {None: ["hello table"], 0: ["hello table"], 1: ["hello table", "psst", "ok"],
                    2: ["hello table", "psst"], 3: ["hello table", "psst", "ok"]}
    # a cursor lists what came after it, a limit cuts the page
    assert [m.text for m in app.list_chat(match_id, Viewer(1), after_id=hello.id)] == ["psst", "ok"]
    assert [m.text for m in app.list_chat(match_id, Viewer(1), limit=2)] == ["hello table", "psst"]
    assert app.list_chat(match_id, Viewer(1), after_id=answer.id) == []


def test_a_page_of_listed_messages_skips_those_the_reader_may_not_read_however_many(app: CommandApp) -> None:
    """More private messages of others than a store page (100) between two table messages:
    the reader still gets the next table message in one call."""
    app.chat.limits = ChatLimits(rate=0)
    match_id = _table(app)
    app.send_chat(match_id, Viewer(0), "first", [], "first")
    for i in range(chat.MAX_CHAT_PAGE + 20):
        app.send_chat(match_id, Viewer(1), f"p{i}", [2], f"private {i}")
    app.send_chat(match_id, Viewer(0), "last", [], "last")
    assert [m.text for m in app.list_chat(match_id, Viewer(3))] == ["first", "last"]
    assert [m.text for m in app.list_chat(match_id, Viewer(None), limit=1)] == ["first"]
    assert len(app.list_chat(match_id, Viewer(2))) == chat.MAX_CHAT_PAGE  # the cap: 0 asks for it


def test_a_retry_under_the_same_message_id_answers_the_first_message_and_another_message_is_refused(
        app: CommandApp) -> None:
    match_id = _table(app)
    first = app.send_chat(match_id, Viewer(0), "m1", [1, 2], "deal?")
    again = app.send_chat(match_id, Viewer(0), "m1", [2, 1], "  deal?\n")  # the same message, as stored
    assert again.duplicate and not first.duplicate and again.message == first.message
    for to_seats, text in (([1, 2], "no deal"), ([1], "deal?"), ([], "deal?")):
        with pytest.raises(Aborted) as raised:
            app.send_chat(match_id, Viewer(0), "m1", to_seats, text)
        assert raised.value.code == "message_id_reused"
    assert [m.text for m in app.list_chat(match_id, Viewer(1))] == ["deal?"]


def test_a_seat_over_its_rate_is_refused_until_its_window_passes_and_a_retry_never_counts(
        app: CommandApp) -> None:
    app.chat.limits = ChatLimits(rate=3, window_ms=60_000)
    match_id = _table(app)
    for i in range(3):
        app.send_chat(match_id, Viewer(0), f"m{i}", [], f"message {i}")
    assert app.send_chat(match_id, Viewer(0), "m0", [], "message 0").duplicate  # a retry is answered
    with pytest.raises(ResourceExhausted) as raised:
        app.send_chat(match_id, Viewer(0), "m3", [], "one too many")
    assert raised.value.code == "chat_too_fast" and "3 messages in 60 s" in raised.value.message
    app.send_chat(match_id, Viewer(1), "m3", [], "another seat talks on")
    other = _table(app)
    app.send_chat(other, Viewer(0), "m3", [], "and the same seat at another table")
    app.chat.send(match_id, 0, "later", (), "a window later", now_ms=10**13)  # the window passed


def test_who_may_send_and_read_is_the_tokens_seat_of_this_match(app: CommandApp) -> None:
    match_id = _table(app, seats=3)
    with pytest.raises(Unauthenticated) as raised:
        app.send_chat(match_id, Viewer(None), "m1", [], "a spectator")
    assert raised.value.code == "no_token"
    for call in (lambda: app.send_chat(match_id, Viewer(3), "m1", [], "x"),
                 lambda: app.list_chat(match_id, Viewer(3)),
                 lambda: next(app.chat_messages(match_id, Viewer(5), follow=False))):
        with pytest.raises(PermissionDenied) as raised:
            call()
        assert raised.value.code == "no_such_seat"
    for call in (lambda: app.send_chat("m-nobody", Viewer(0), "m1", [], "x"),
                 lambda: app.list_chat("m-nobody", Viewer(None))):
        with pytest.raises(NotFound) as raised:
            call()
        assert raised.value.code == "unknown_match"
    with pytest.raises(InvalidArgument) as raised:
        app.list_chat("", Viewer(None))
    assert raised.value.code == "no_match_id"


def test_a_game_whose_engine_has_its_own_chat_refuses_match_chat_naming_its_command(app: CommandApp) -> None:
    match_id = _table(app, "nothing_personal", 3)
    for call in (lambda: app.send_chat(match_id, Viewer(0), "m1", [], "hi"),
                 lambda: app.list_chat(match_id, Viewer(0)),
                 lambda: next(app.chat_messages(match_id, Viewer(None), follow=False))):
        with pytest.raises(FailedPrecondition) as raised:
            call()
        assert raised.value.code == "chat_in_engine" and "send_chat" in raised.value.message


def test_a_match_over_keeps_its_chat_open_for_post_game_talk(app: CommandApp) -> None:
    match_id = _table(app)
    app.cancel_match(match_id, "ops", "the table left")
    app.send_chat(match_id, Viewer(2), "gg", [], "gg")
    assert [m.text for m in app.list_chat(match_id, Viewer(None))] == ["gg"]


def test_a_stream_replays_after_its_cursor_what_the_reader_may_read_and_stops_until_now(app: CommandApp) -> None:
    match_id = _table(app)
    sent = [app.send_chat(match_id, Viewer(0), "a", [], "a").message,
            app.send_chat(match_id, Viewer(0), "b", [1], "b").message,
            app.send_chat(match_id, Viewer(1), "c", [], "c").message]
    assert [m.text for m in app.chat_messages(match_id, Viewer(2), follow=False)] == ["a", "c"]
    assert [m.text for m in app.chat_messages(match_id, Viewer(1), sent[0].id, follow=False)] == ["b", "c"]
    # followed, it waits for the next one, and ends when its client leaves
    active = iter([True, True, False])
    stream = app.chat_messages(match_id, Viewer(1), sent[2].id, follow=True, is_active=lambda: next(active),
                               poll_ms=10)
    assert list(stream) == []


def test_a_cursor_no_message_has_yet_is_refused_by_a_list_and_a_stream_not_waited_on(app: CommandApp) -> None:
    """StreamChat from a cursor in the future waited (until the clock got there, or for ever),
    and ListChat answered it an empty page, while the messages stored meanwhile went unseen."""
    match_id = _table(app)
    quiet = _table(app)
    last = app.send_chat(match_id, Viewer(0), "a", [], "a").message
    ahead = "18446744073709551615-18446744073709551615"
    polls = iter(range(50))  # a bound, should the stream wait on the cursor
    for table in (match_id, quiet):
        with pytest.raises(InvalidArgument) as listed:
            app.list_chat(table, Viewer(1), after_id=ahead)
        with pytest.raises(InvalidArgument) as until_now:
            list(app.chat_messages(table, Viewer(1), ahead, follow=False))
        with pytest.raises(InvalidArgument) as followed:
            list(app.chat_messages(table, Viewer(None), ahead, follow=True, poll_ms=1,
                                   is_active=lambda: next(polls, None) is not None))
        assert listed.value.code == until_now.value.code == followed.value.code == "bad_after_id"
    # the newest message's id is an honest cursor: nothing after it yet, and a stream waits
    assert app.list_chat(match_id, Viewer(1), after_id=last.id) == []
    active = iter([True, True, False])
    assert list(app.chat_messages(match_id, Viewer(1), last.id, follow=True, poll_ms=1,
                                  is_active=lambda: next(active))) == []


def _numbers_out(text: str) -> str:
    """A refusal's text without its numbers (the cursor, the store's clock)."""
    return re.sub(r"[0-9]+", "#", text)


def test_a_refused_cursor_tells_a_reader_nothing_of_the_messages_it_may_not_read(app: CommandApp) -> None:
    """The refusal of a cursor no message has yet named the chat's newest message: a private one
    too (seat 1 to seat 2), whose id (when it was sent, that it was) a spectator or a third seat
    read off the text. A table with that message and one without it answer alike."""
    whispered, quiet = _table(app), _table(app)
    for table in (whispered, quiet):
        app.send_chat(table, Viewer(0), "a", [], "hello table")
    psst = app.send_chat(whispered, Viewer(1), "b", [2], "psst").message
    ahead = "18446744073709551615-0"
    for reader in (Viewer(None), Viewer(0), Viewer(3)):
        told = []
        for table in (whispered, quiet):
            with pytest.raises(InvalidArgument) as listed:
                app.list_chat(table, reader, after_id=ahead)
            with pytest.raises(InvalidArgument) as streamed:
                list(app.chat_messages(table, reader, ahead, follow=False))
            told.append([(e.value.code, e.value.message) for e in (listed, streamed)])
        assert psst.id not in repr(told), f"seat {reader.seat} is told the private message's id"
        alike = [[(code, _numbers_out(text)) for code, text in answers] for answers in told]
        assert alike[0] == alike[1], f"seat {reader.seat} tells a whispering table from a quiet one"


def test_a_private_messages_id_is_a_cursor_for_its_readers_only(app: CommandApp,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """In the millisecond a private message is stored, its id as a cursor was taken from anyone
    (the chat's newest message) where an id no message has is refused: a third seat could test
    for a whisper's id. Its readers' cursor it stays; the others are answered as if it were not
    there."""
    match_id = _table(app)
    app.send_chat(match_id, Viewer(0), "a", [], "hello table")
    psst = app.send_chat(match_id, Viewer(1), "b", [2], "psst").message
    newest = app.chat.newest
    monkeypatch.setattr(app.chat, "newest", lambda m: (newest(m)[0], entry_key(psst.id)[0]))  # its millisecond
    for reader in (Viewer(1), Viewer(2)):
        assert app.list_chat(match_id, reader, after_id=psst.id) == []
    for reader in (Viewer(None), Viewer(0), Viewer(3)):
        with pytest.raises(InvalidArgument) as listed:
            app.list_chat(match_id, reader, after_id=psst.id)
        with pytest.raises(InvalidArgument) as streamed:
            list(app.chat_messages(match_id, reader, psst.id, follow=False))
        assert listed.value.code == streamed.value.code == "bad_after_id"


def test_list_games_tells_which_games_have_match_chat() -> None:
    from services.command.entrypoints.grpc_server import GameServicer

    app = bootstrap(store=InMemoryEventStore(), registry=REGISTRY, settings=SETTINGS)
    games = GameServicer(app).ListGames.__wrapped__(GameServicer(app), None, None).games
    assert {g.game_id: g.match_chat for g in games} == {
        "goodcritters": True, "grifters": True, "nostra_city": True, "nothing_personal": False}


def test_a_followed_chat_ends_match_archived_once_its_match_is_trimmed(app: CommandApp, store: InMemoryEventStore
                                                                       ) -> None:
    """A follower of a finished match's chat waited on for ever once the match was archived: its
    chat gone with the trim and no message to come, it held one of the server's streams (its
    client never told why) for as long as its connection lived."""
    match_id = _table(app)
    app.cancel_match(match_id, "ops", "the table left")
    app.send_chat(match_id, Viewer(0), "gg", [], "gg")
    polls = iter(range(200))  # a bound, should the stream never end by itself
    stream = app.chat_messages(match_id, Viewer(None), follow=True, poll_ms=1,
                               is_active=lambda: next(polls, None) is not None)
    assert next(stream).text == "gg"
    store.trim(match_id)
    with pytest.raises(NotFound) as raised:
        next(stream)
    assert raised.value.code == "match_archived"


def test_a_listed_chat_of_a_match_trimmed_since_this_replica_read_it_is_match_archived(
        app: CommandApp, store: InMemoryEventStore) -> None:
    """The replica still holds the match in memory after another process archived and trimmed
    it: its chat went with it, so ListChat answers as StreamChat and SendChat do, not with an
    empty page that looks like a quiet table."""
    match_id = _table(app)
    app.send_chat(match_id, Viewer(0), "hi", [], "hi")
    assert [m.text for m in app.list_chat(match_id, Viewer(1))] == ["hi"]
    app.cancel_match(match_id, "ops", "the table left")
    store.trim(match_id)
    app.chat = type(app.chat)(app.chat.limits)  # the trim took the chat (the Redis store's trim.lua does)
    with pytest.raises(NotFound) as raised:
        app.list_chat(match_id, Viewer(1))
    assert raised.value.code == "match_archived"
    fresh = _table(app)
    assert app.list_chat(fresh, Viewer(1)) == []  # a quiet table is an empty page
