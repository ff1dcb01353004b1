"""NP-H9 through the command service: a window's answers are held back, out of the version.

Other seats see that a card window is open, never which seats it waits for. An answer that
took a version of its own told them: each version step is visible to every seat (a hidden
event's place in ListMatchEvents, GetView's version), so in a window asking two seats each
learnt whether the other had answered. Answers are now staged (`EventStore.stage`) until
the next public command, which goes in behind a slot a seat, each holding the seat's answer or
padding (`EventStore.write_out`): where an answer lands tells nothing of when it came.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence

import pytest

from famiglia.config import Settings
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.grpcutil.errors import FailedPrecondition
from famiglia.matchstate import MatchState, command_key
from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb
from famiglia.replay.verify import verify_envelopes
from famiglia.v1 import envelope_pb2
from services.command.app import CommandApp
from services.command.bootstrap import bootstrap
from tests.contracts.eventstore_contract import envelope

SETTINGS = Settings(secret="unit-test-secret")
GAME = "nothing_personal"


def _to_a_window(app: CommandApp, match_id: str, tokens: list[str], rng: random.Random, asked: int = 2,
                 prefix: str = "walk"):
    """Random legal play until a window asks at least `asked` seats and none has answered;
    None if the game ends first."""
    hot = app.matches.get(match_id)
    for step in range(4000):
        m = hot.match
        w = m.state.window
        if w is not None and len(w.seats) >= asked and all(w.answers[s] is None for s in w.seats):
            return w
        if m.finished:
            return None
        seat = rng.choice([p.seat for p in m.engine.pending(m.state)])
        viewer = app.viewer(match_id, tokens[seat])
        commands = app.legal_commands(match_id, viewer, limit=32).commands
        app.submit(match_id, viewer, f"{prefix}-{step}", rng.choice(commands))
    raise AssertionError("no window in 4,000 commands")


def _window_match(app: CommandApp, asked: int = 2):
    for seed in range(1, 40):
        created = app.create_match(GAME, 3, seed=seed)
        window = _to_a_window(app, created.match_id, created.seat_tokens, random.Random(seed), asked)
        if window is not None:
            return created, window
    raise AssertionError("no seed reached a window")


def _what_seat_sees(app: CommandApp, match_id: str, token: str | None):
    """Everything a seat can ask the service about the match, as comparable values."""
    viewer = app.viewer(match_id, token)
    view = app.get_view(match_id, viewer)
    seen = [view.version, view.view.SerializeToString(deterministic=True), [(p.seat, p.kind) for p in view.to_act]]
    if viewer.seat is not None:
        legal = app.legal_commands(match_id, viewer)
        seen += [legal.version, [c.SerializeToString(deterministic=True) for c in legal.commands]]
    seen.append([(e.envelope.seq, e.envelope.seat, e.envelope.command_id, e.event.SerializeToString())
                 for e, _v, _f in app.events(match_id, viewer, 0, follow=False) if e is not None])
    return seen


def _pass(seat_token_viewer_app: CommandApp, match_id: str, token: str, command_id: str, **kw):
    app = seat_token_viewer_app
    return app.submit(match_id, app.viewer(match_id, token), command_id, pb.Command(**{"pass": pb.Pass()}), **kw)


def test_an_answer_moves_nothing_another_seat_or_a_spectator_can_see() -> None:
    store = InMemoryEventStore()
    app = bootstrap(store=store, settings=SETTINGS)
    created, window = _window_match(app)
    match_id, tokens = created.match_id, created.seat_tokens
    first, other = window.seats[0], window.seats[1]
    outsiders = [None] + [tokens[s] for s in range(3) if s != first]
    before = {token: _what_seat_sees(app, match_id, token) for token in outsiders}
    version = store.version(match_id)

    answered = _pass(app, match_id, tokens[first], "answer-1")

    assert answered.held and answered.version == version
    assert [e.envelope.seq for e in answered.events] and all(e.held for e in answered.events)
    assert store.version(match_id) == version and store.read(match_id, after=version) == []
    for token in outsiders:
        assert _what_seat_sees(app, match_id, token) == before[token]
    # the seat that answered sees its answer in its view, at the same version
    mine = app.get_view(match_id, app.viewer(match_id, tokens[first]))
    assert mine.version == version and mine.view.window_answered_by_me
    # a retry is the first answer again, still held
    again = _pass(app, match_id, tokens[first], "answer-1")
    assert again.duplicate and again.held and again.version == version
    # the other seat answers at the version it knows
    _pass(app, match_id, tokens[other], "answer-2", expected_version=version)


def test_the_next_public_event_writes_the_answers_first_each_in_its_seats_slot() -> None:
    """The window's last answer is public: it goes in behind a slot a seat, the held answers
    in theirs (renumbered), padding in the others', its own seat's included."""
    store = InMemoryEventStore()
    app = bootstrap(store=store, settings=SETTINGS)
    created, window = _window_match(app)
    match_id, tokens = created.match_id, created.seat_tokens
    version = store.version(match_id)
    for i, seat in enumerate(window.seats):
        done = _pass(app, match_id, tokens[seat], f"answer-{seat}")
        if i < len(window.seats) - 1:
            assert done.held and done.version == version
    assert not done.held and done.version > version + 3
    written = store.read(match_id, after=version)
    assert [e.seq for e in written] == list(range(version + 1, done.version + 1))
    held = window.seats[:-1]
    assert [(e.type, e.seat, e.command_id) for e in written[:3]] == [
        ("window_answered", s, f"answer-{s}") if s in held else ("window_padding", -1, "") for s in range(3)]
    assert (written[3].type, written[3].seat, written[3].command_id) == (
        "window_answered", window.seats[-1], f"answer-{window.seats[-1]}")
    assert store.read_staged(match_id) == [] and app.matches.get(match_id).match.staged == []


def test_a_second_replica_finds_the_held_answers_and_resolves_the_window() -> None:
    store = InMemoryEventStore()
    one = bootstrap(store=store, settings=SETTINGS)
    created, window = _window_match(one)
    match_id, tokens = created.match_id, created.seat_tokens
    two = bootstrap(store=store, settings=SETTINGS)
    two.get_view(match_id, two.viewer(match_id, None))  # loaded before the answers
    version = store.version(match_id)
    for i, seat in enumerate(window.seats[:-1]):
        assert _pass(one, match_id, tokens[seat], f"answer-{i}").held
    # the last answer on the other replica: it catches up with the staged answers and resolves
    last = _pass(two, match_id, tokens[window.seats[-1]], "last", expected_version=version)
    assert not last.held and last.version > version
    assert store.read_staged(match_id) == []
    # and the first replica goes on from the stream
    spectator = one.get_view(match_id, one.viewer(match_id, None))
    assert spectator.version == store.version(match_id) == last.version
    assert one.matches.get(match_id).match.staged == []


@pytest.mark.parametrize("stale", [True, False])
def test_a_held_answer_does_not_make_a_seats_version_stale(stale: bool) -> None:
    """The version a seat knows is the one it may name; naming the position (a version it
    cannot know) would tell it that someone answered, so that is refused as stale."""
    store = InMemoryEventStore()
    app = bootstrap(store=store, settings=SETTINGS)
    created, window = _window_match(app)
    match_id, tokens = created.match_id, created.seat_tokens
    version = store.version(match_id)
    _pass(app, match_id, tokens[window.seats[0]], "answer-1")
    from famiglia.grpcutil.errors import Aborted
    if stale:
        with pytest.raises(Aborted):
            _pass(app, match_id, tokens[window.seats[1]], "answer-2", expected_version=version + 1)
    else:
        assert _pass(app, match_id, tokens[window.seats[1]], "answer-2", expected_version=version).version >= version


def test_a_chain_answers_a_window_for_several_seats_and_a_retry_is_its_first_answer() -> None:
    """A bots worker plays a window's seats in one SubmitCommands call. Each later entry goes
    in where the one before left the match (its position: the held answers counted), and
    "{version}" in its id names the version the table can see there (never the position,
    which counts the held answers: NP-H9), so a retried call resolves every id as the first did."""
    from services.command.app import ChainedCommand

    store = InMemoryEventStore()
    app = bootstrap(store=store, settings=SETTINGS)
    created, window = _window_match(app, asked=3)
    match_id, tokens = created.match_id, created.seat_tokens
    version = store.version(match_id)
    passing = pb.Command(**{"pass": pb.Pass()}).SerializeToString()
    type_url = "type.googleapis.com/" + pb.Command.DESCRIPTOR.full_name
    chain = [ChainedCommand(tokens[s], f"bot:{{version}}:{s}", type_url, passing) for s in window.seats]

    first = app.submit_chain(match_id, chain, version)
    assert first.refusal is None
    assert [d.held for d in first.taken] == [True] * (len(chain) - 1) + [False]
    assert [d.version for d in first.taken[:-1]] == [version] * (len(chain) - 1)
    written = [e for e in store.read(match_id, after=version) if e.type == "window_answered"]
    named = {s: f"bot:{version}:{s}" for s in window.seats}  # the version the table sees: held answers move none
    held, last = sorted(window.seats[:-1]), window.seats[-1]  # the held ones in their seats' slots
    assert [e.command_id for e in written] == [named[s] for s in held] + [named[last]]

    stored = store.version(match_id)
    again = app.submit_chain(match_id, chain, version)
    assert again.refusal is None and all(d.duplicate for d in again.taken)
    assert [d.position for d in again.taken] == [d.position for d in first.taken]
    assert store.version(match_id) == stored == first.taken[-1].version  # nothing new


def _auto_pass_held(seed: int = 2):
    """A 3-seat match with the private auto-pass made a held kind, at a turn of one seat (`turn`)
    where another (`idle`) may change its auto-pass: (app, store, created, turn, idle)."""
    import dataclasses

    from famiglia.engine.registry import Registry, default_registry

    engine = default_registry().get(GAME)
    registry = Registry({GAME: dataclasses.replace(engine, info=dataclasses.replace(
        engine.info, held_events=engine.info.held_events | {"auto_pass_set"}))})
    store = InMemoryEventStore()
    app = bootstrap(store=store, registry=registry, settings=SETTINGS)
    created = app.create_match(GAME, 3, seed=seed)
    match_id, tokens = created.match_id, created.seat_tokens
    m = app.matches.get(match_id).match
    rng = random.Random(seed)
    for step in range(200):  # to a turn of one seat where another may change its auto-pass
        asked = {p.seat for p in m.engine.pending(m.state)}
        if len(asked) == 1:
            turn, idle = min(asked), (min(asked) + 1) % 3
            if _AUTO in m.engine.legal_commands(m.state, idle) and _AUTO in m.engine.legal_commands(m.state, turn):
                return app, store, created, turn, idle
        seat = rng.choice(sorted(asked))
        commands = app.legal_commands(match_id, app.viewer(match_id, tokens[seat]), limit=32).commands
        app.submit(match_id, app.viewer(match_id, tokens[seat]), f"walk-{step}",
                   rng.choice([c for c in commands if c.WhichOneof("kind") != "set_auto_pass"]))
    raise AssertionError("no turn of one seat in 200 commands")


_AUTO = pb.Command(set_auto_pass=pb.SetAutoPass(cards=True))


def test_only_a_command_that_asks_nobody_anything_new_is_held() -> None:
    """A held command waits unseen by every other process, the bots' dispatcher included: one
    after which the game waits for anyone anew (its own seat again, after an optional move on
    its own turn) would wait forever. Such a command goes to the stream, whatever its kinds.
    Here the private auto-pass is made a held kind to show both sides."""
    app, store, created, turn, idle = _auto_pass_held()
    match_id, tokens = created.match_id, created.seat_tokens
    version = store.version(match_id)
    on_its_turn = app.submit(match_id, app.viewer(match_id, tokens[turn]), "auto-1", _AUTO)
    assert not on_its_turn.held and store.version(match_id) == version + 1
    meanwhile = app.submit(match_id, app.viewer(match_id, tokens[idle]), "auto-2", _AUTO)
    assert meanwhile.held and store.version(match_id) == version + 1


def test_a_command_of_two_events_does_not_fit_a_slot() -> None:
    """A slot holds one event: a held command of two would make its seat's slot longer than the
    padding beside it (no Nothing Personal command makes two held events today, so no walk
    reaches this; found by mutating _fits_a_slot)."""
    from types import SimpleNamespace

    from famiglia.engine.registry import default_registry
    from services.command.app import _fits_a_slot

    event = default_registry().get(GAME).info.padding_event()
    nothing_held = SimpleNamespace(staged=[])
    assert _fits_a_slot(nothing_held, 0, [event])  # type: ignore[arg-type]
    assert not _fits_a_slot(nothing_held, 0, [event, event])  # type: ignore[arg-type]

def test_a_seat_holds_one_event_at_a_time_and_a_second_goes_behind_the_slots() -> None:
    """A slot holds one event: a seat's second held event would make its slot longer, telling
    whose it is. Nothing Personal holds one answer a seat a window, so this never happens
    there; with the private auto-pass made a held kind a seat can make two, and the second
    goes to the stream as a public command, behind the slots that write the first out."""
    app, store, created, turn, idle = _auto_pass_held()
    match_id, tokens = created.match_id, created.seat_tokens
    version = store.version(match_id)
    assert app.submit(match_id, app.viewer(match_id, tokens[idle]), "auto-1", _AUTO).held
    off = pb.Command(set_auto_pass=pb.SetAutoPass(cards=False))
    second = app.submit(match_id, app.viewer(match_id, tokens[idle]), "auto-2", off)
    assert not second.held and second.version == store.version(match_id) == version + 3 + 1
    written = store.read(match_id, after=version)
    assert [(e.type, e.seat) for e in written] == [
        ("auto_pass_set", s) if s == idle else ("window_padding", -1) for s in range(3)] + [("auto_pass_set", idle)]
    assert [e.command_id for e in written if e.command_id] == ["auto-1", "auto-2"]
    assert app.matches.get(match_id).match.staged == [] and store.read_staged(match_id) == []


def test_a_replica_whose_two_reads_straddle_a_window_catches_up_whole() -> None:
    """Catching up reads the stream, then the staged answers: two calls. Should another replica
    write the held answers out and hold new ones in between, the staged answers no longer
    follow what was read, and the stream is read again (it was a ValueError: INTERNAL)."""
    store = InMemoryEventStore()
    one = bootstrap(store=store, settings=SETTINGS)
    created, window = _window_match(one)
    match_id, tokens = created.match_id, created.seat_tokens
    two = bootstrap(store=store, settings=SETTINGS)
    two.get_view(match_id, two.viewer(match_id, None))  # loaded before the window's answers
    read_staged, meanwhile = store.read_staged, []

    def straddled(mid: str, after: int = 0):
        if not meanwhile:  # between the two reads: the window resolves and a new answer is held
            meanwhile.append(store.version(mid))
            for i, seat in enumerate(window.seats):
                _pass(one, match_id, tokens[seat], f"answer-{i}")
            _to_a_window(one, match_id, tokens, random.Random(5), prefix="again")
            hot = one.matches.get(match_id).match
            _pass(one, match_id, tokens[hot.state.window.seats[0]], "next-window")
            assert one.matches.get(match_id).match.staged
        return read_staged(mid, after)

    store.read_staged = straddled  # type: ignore[method-assign]
    view = two.get_view(match_id, two.viewer(match_id, None))
    assert meanwhile and view.version == store.version(match_id) > meanwhile[0]
    m = two.matches.get(match_id).match
    assert m.version == one.matches.get(match_id).match.version and len(m.staged) == 1


def _chat(app: CommandApp, match_id: str, token: str, command_id: str, to: list[int]):
    chat = pb.Command(send_chat=pb.SendChat(to=to, text="how is everyone?"))
    return app.submit(match_id, app.viewer(match_id, token), command_id, chat)


@pytest.mark.parametrize("answers", [0, 1, 2])
def test_a_command_made_while_a_window_is_open_does_not_count_the_answers(answers: int) -> None:
    """NP-H9: a chat (or an offer, a shakedown) made while a window is open writes out the
    answers held so far ahead of it, in a slot a seat: a seat's answer or, for a seat with
    none, a padding event, seen by nobody. The chat moves the version by the seats and its
    own event whatever the number of answers, so neither the table nor the one who chats
    can count them. (Before slots the block was one fewer than the seats: the answers in
    the order they came, then padding.)"""
    seen = {}
    for given in (0, answers):
        store = InMemoryEventStore()
        app = bootstrap(store=store, settings=SETTINGS)
        created, window = _window_match(app, asked=3)  # the same seeds: the same window
        match_id, tokens = created.match_id, created.seat_tokens
        version = store.version(match_id)
        for i, seat in enumerate(window.seats[:given]):
            assert _pass(app, match_id, tokens[seat], f"answer-{i}").held
        chatter = window.seats[-1]  # asked, not answered yet
        chatted = _chat(app, match_id, tokens[chatter], "chat-1", [window.seats[0]])
        assert not chatted.held and chatted.version == version + 3 + 1  # 3 seats: 3 slots, the chat
        written = store.read(match_id, after=version)
        assert [e.type for e in written].count("window_answered") == given
        assert [e.type for e in written].count("window_padding") == 3 - given
        assert all(e.seat == -1 and not e.command_id for e in written if e.type == "window_padding")
        seen[given] = {"spectator": _what_seat_sees(app, match_id, None),
                       "chatter": _what_seat_sees(app, match_id, tokens[chatter])}
        # the answers still to come are held as before, and the last resolves the window
        for i, seat in enumerate(window.seats[given:], start=given):
            last = _pass(app, match_id, tokens[seat], f"answer-{i}")
        assert not last.held and store.read_staged(match_id) == []
        fresh = bootstrap(store=store, settings=SETTINGS)  # a replica folding the stream agrees
        assert fresh.matches.get(match_id).match.state == app.matches.get(match_id).match.state
        report = verify_envelopes(app.registry, store.read(match_id))  # and a replay re-deciding it
        assert report.divergence is None, report.divergence
    # A spectator, and the one who chats (asked, not answered yet), see the same whether
    # answers had come in or not.
    assert seen[answers] == seen[0]


def test_no_padding_where_nothing_is_held() -> None:
    """A match of bots only holds nothing back, and so pads nothing (tournaments, benchmarks)."""
    from famiglia.v1 import envelope_pb2

    store = InMemoryEventStore()
    app = bootstrap(store=store, settings=SETTINGS)
    bots = [envelope_pb2.SeatInfo(seat=s, player_id=f"bot-{s}", bot=True) for s in range(3)]
    for seed in range(1, 40):
        created = app.create_match(GAME, 3, seed=seed, seat_info=bots)
        window = _to_a_window(app, created.match_id, created.seat_tokens, random.Random(seed), 3)
        if window is not None:
            break
    version = store.version(created.match_id)
    chatted = _chat(app, created.match_id, created.seat_tokens[window.seats[0]], "chat-1", [window.seats[1]])
    assert chatted.version == version + 1
    assert [e.type for e in store.read(created.match_id, after=version)] == ["chat_sent"]


def _window_of_every_seat(app: CommandApp, seats: int):
    """A match of `seats` (a person at the table: no seat info) at a window that asks every seat."""
    for seed in range(1, 40):
        created = app.create_match(GAME, seats, seed=seed)
        window = _to_a_window(app, created.match_id, created.seat_tokens, random.Random(seed), seats)
        if window is not None:
            return created, window
    raise AssertionError(f"no seed reached a window of {seats} seats")


def _arrival_orders(seats: list[int], most: int = 24) -> list[tuple[int, ...]]:
    """Orders the answers may come in: every one (at most `most`, spread over them)."""
    orders = list(itertools.permutations(seats))
    step = max(1, len(orders) // most)
    return orders[::step]


@pytest.mark.parametrize("seats", [3, 4, 5])
def test_where_an_answer_is_written_out_tells_nothing_of_the_others(seats: int) -> None:
    """NP-H9: held answers are written out ahead of the next public command (a chat made while
    the window is open) in fixed slots, one per seat in seat order, padding where a seat has
    none. So a seat whose own answer is written out sees it at the same place whichever order
    the answers came in: nothing in what any seat can observe tells how many answered before
    it. (Written in arrival order, a seat counted the hidden events before its own answer.)"""
    seen = {}
    for order in _arrival_orders(list(range(seats - 1))):
        store = InMemoryEventStore()
        app = bootstrap(store=store, settings=SETTINGS)
        created, window = _window_of_every_seat(app, seats)  # the same seeds: the same window
        match_id, tokens = created.match_id, created.seat_tokens
        chatter = window.seats[-1]  # asked, not answering yet
        answering = [s for s in window.seats if s != chatter]
        version = store.version(match_id)
        for i in order:
            assert _pass(app, match_id, tokens[answering[i]], f"answer-{answering[i]}").held
        chatted = _chat(app, match_id, tokens[chatter], "chat-1", [answering[0]])
        assert not chatted.held and chatted.version == version + seats + 1  # a slot a seat, the chat
        written = store.read(match_id, after=version)
        assert [(e.type, e.seat) for e in written[:seats]] == [
            ("window_answered", s) if s in answering else ("window_padding", -1) for s in range(seats)]
        seen[order] = [_what_seat_sees(app, match_id, token) for token in [None, *tokens]]
        assert not _pass(app, match_id, tokens[chatter], "last").held  # the window resolves
        seen[order] += [_what_seat_sees(app, match_id, token) for token in [None, *tokens]]
    first = next(iter(seen.values()))
    for order, observed in seen.items():
        for viewer, (one, other) in enumerate(zip(first, observed, strict=True)):
            assert one == other, f"seat {viewer - 1} tells arrival order {order} from {next(iter(seen))}"


def _held_then_a_chat(app: CommandApp, seats: int, order: Sequence[int]):
    """A window of every seat; all but its last seat answer (held) in `order` (indices into
    them), then the last one chats: (created, window, the version before the window)."""
    created, window = _window_of_every_seat(app, seats)
    match_id, tokens = created.match_id, created.seat_tokens
    version = app.store.version(match_id)
    answering = window.seats[:-1]
    for i in order:
        assert _pass(app, match_id, tokens[answering[i]], f"answer-{answering[i]}").held
    _chat(app, match_id, tokens[window.seats[-1]], "chat-1", [answering[0]])
    return created, window, version


def _fresh_fold(app: CommandApp, match_id: str) -> MatchState:
    """The match as a process that has never seen it folds it from the store."""
    match = MatchState.from_envelopes(app.registry, app.store.read(match_id))
    match.catch_up(app.store)
    return match


def _same_fold(one: MatchState, other: MatchState) -> None:
    assert (one.state, one.version, one.staged, one.commands, one.padded, one.written_out, one.last_timestamp_ms) == (
        other.state, other.version, other.staged, other.commands, other.padded, other.written_out,
        other.last_timestamp_ms)


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 0, 1), (1, 2, 0)])
def test_a_written_out_answers_duplicate_is_its_own_answer_where_its_slot_put_it(order: tuple[int, ...]) -> None:
    """Written out, a held answer took its seat's slot: a new seq. Its command's record moved
    with it, so a retry answers with that answer, there, not with whatever came to sit at its
    old seq (another seat's answer, padding); on this replica, on a fresh one, and in the store."""
    store = InMemoryEventStore()
    app = bootstrap(store=store, settings=SETTINGS)
    created, window, version = _held_then_a_chat(app, 4, order)
    match_id, tokens = created.match_id, created.seat_tokens
    fresh = bootstrap(store=store, settings=SETTINGS)
    for seat in window.seats[:-1]:
        for replica in (app, fresh):
            again = _pass(replica, match_id, tokens[seat], f"answer-{seat}")
            assert again.duplicate and not again.held and again.version == version + seat + 1
            assert [(e.envelope.seq, e.envelope.seat, e.envelope.command_id, e.event.WhichOneof("kind"))
                    for e in again.events] == [(version + seat + 1, seat, f"answer-{seat}", "window_answered")]
        at = store.version(match_id)  # the store's record: a duplicate, whatever the batch
        record = store.append(match_id, at, [envelope(match_id, at + 1)], command_key(seat, f"answer-{seat}"))
        assert record.duplicate and (record.first_seq, record.last_seq) == (version + seat + 1,) * 2


@pytest.mark.parametrize("seats", [3, 4, 5])
def test_after_a_write_out_the_hot_state_is_a_fresh_fold_of_the_store(seats: int) -> None:
    """The held answers were folded as they came; the stream has them in seat order, at other
    seqs. The replica that wrote them out folds them again where they are (`unstage`): its
    state, commands, padding runs are what folding the store from scratch gives, and a
    command made at the version before the block went in past it."""
    store = InMemoryEventStore()
    app = bootstrap(store=store, settings=SETTINGS)
    created, window, version = _held_then_a_chat(app, seats, list(reversed(range(seats - 1))))
    hot = app.matches.get(created.match_id).match
    _same_fold(hot, _fresh_fold(app, created.match_id))
    assert hot.staged == [] and hot.past_padding(version) == version + seats
    assert not _pass(app, created.match_id, created.seat_tokens[window.seats[-1]], "last").held
    _same_fold(hot, _fresh_fold(app, created.match_id))
    report = verify_envelopes(app.registry, store.read(created.match_id))  # a replay re-decides each answer there
    assert report.divergence is None, report.divergence
    assert report.commands_checked > 0


@pytest.mark.parametrize("writer", ["the replica that held them", "the other replica"])
def test_a_replica_that_folded_the_held_answers_catches_up_where_the_slots_put_them(writer: str) -> None:
    """Two replicas on one store. Both have folded the held answers at the seqs they were
    staged at; one writes them out in slots, at other seqs. The other, catching up, must not
    skip them as folded (its position is past their new seqs) nor fold the block's tail on
    top: it goes back to its public version and folds the stream from there."""
    store = InMemoryEventStore()
    one = bootstrap(store=store, settings=SETTINGS)
    created, window = _window_of_every_seat(one, 4)
    match_id, tokens = created.match_id, created.seat_tokens
    two = bootstrap(store=store, settings=SETTINGS)
    two.get_view(match_id, two.viewer(match_id, None))
    version = store.version(match_id)
    answering, chatter = window.seats[:-1], window.seats[-1]
    for seat in reversed(answering):
        assert _pass(one, match_id, tokens[seat], f"answer-{seat}").held
    two.get_view(match_id, two.viewer(match_id, None))  # folds the held answers too
    assert len(two.matches.get(match_id).match.staged) == 3
    chatting, other = (one, two) if writer == "the replica that held them" else (two, one)
    assert _chat(chatting, match_id, tokens[chatter], "chat-1", [answering[0]]).version == version + 4 + 1
    other.get_view(match_id, other.viewer(match_id, None))
    _same_fold(other.matches.get(match_id).match, _fresh_fold(other, match_id))
    _same_fold(other.matches.get(match_id).match, chatting.matches.get(match_id).match)
    # and the other replica plays on: the window's last answer, then a duplicate of a held one
    assert not _pass(other, match_id, tokens[chatter], "last", expected_version=version + 5).held
    again = _pass(other, match_id, tokens[answering[0]], f"answer-{answering[0]}")
    assert again.duplicate and [e.envelope.seq for e in again.events] == [version + answering[0] + 1]
    chatting.get_view(match_id, chatting.viewer(match_id, None))
    _same_fold(chatting.matches.get(match_id).match, _fresh_fold(chatting, match_id))
    assert verify_envelopes(one.registry, store.read(match_id)).divergence is None


@pytest.mark.parametrize("before", [0, 1, 2])
def test_a_block_is_found_whatever_answer_stands_right_before_it(before: int) -> None:
    """A block is any run of a seat's worth of slot events in slot order (slot s: seat s's
    answer or padding): a seat's answer made public just before one (it was not held) is not
    taken for the block's first slot, hiding the block."""
    from types import SimpleNamespace

    from famiglia.v1 import envelope_pb2

    info = SimpleNamespace(held_padding="window_padding", held_events=frozenset({"window_answered"}),
                           event_type=pb.Event)
    engine = SimpleNamespace(info=info, evolve=lambda state, event: state)
    match = MatchState("m", envelope_pb2.MatchCreated(seats=3), engine, state=object(), version=10)

    def env(seq: int, kind: str, seat: int = -1, command_id: str = "") -> envelope_pb2.EventEnvelope:
        return envelope_pb2.EventEnvelope(match_id="m", seq=seq, type=kind, seat=seat, command_id=command_id)

    events = [env(11, "window_answered", before, "answer"),  # public: the window asked it again
              env(12, "window_padding"), env(13, "window_answered", 1, "held"), env(14, "window_padding"),
              env(15, "chat_sent", 2, "chat")]  # the command behind the block 12..14
    match.apply(events, [pb.Event()] * len(events))
    assert match.past_padding(11) == 14



def _held_then_a_public_entry(person_answers: bool, bot_answers: bool):
    """A 3-seat window where the first seat (a person) may answer on its own, held, then a chain
    plays the second seat's answer (held), if `bot_answers`, and the third seat's shakedown
    (NP-R6: public, made while the window is open): (app, match id, version before, chain, answer)."""
    from services.command.app import ChainedCommand

    store = InMemoryEventStore()
    app = bootstrap(store=store, settings=SETTINGS)
    created, window = _window_match(app, asked=3)  # the same seeds: the same window
    match_id, tokens = created.match_id, created.seat_tokens
    version = store.version(match_id)
    person, bot, shaker = window.seats
    if person_answers:
        assert _pass(app, match_id, tokens[person], "person").held
    type_url = "type.googleapis.com/" + pb.Command.DESCRIPTOR.full_name
    card = app.matches.get(match_id).match.state.hands[shaker][0]
    shakedown = pb.Command(shakedown=pb.Shakedown(cards=[card])).SerializeToString()
    passing = pb.Command(**{"pass": pb.Pass()}).SerializeToString()
    chain = [ChainedCommand(tokens[bot], f"bot:{{version}}:{bot}", type_url, passing)] \
        if bot_answers else []
    chain.append(ChainedCommand(tokens[shaker], f"bot:{{version}}:{shaker}", type_url, shakedown))
    done = app.submit_chain(match_id, chain, version)
    assert done.refusal is None and [d.held for d in done.taken] == [True] * bot_answers + [False]
    return app, match_id, version, chain, done


def test_np_h9_a_chains_public_entry_is_not_named_by_the_answers_held_before_it() -> None:
    """NP-H9: a chain's later entry names "{version}" by where the entry before left the match.
    That was its position, the held answers counted (a person's included): a public entry made
    while the window is open (a bot's shakedown after another bot's held answer) showed the
    table, in its command id, how many answers had come in. It is named by the version the
    table can see, so what the table sees is the same whoever answered before it."""
    seen = {}
    for person_answers, bot_answers in itertools.product((False, True), repeat=2):
        app, match_id, version, chain, done = _held_then_a_public_entry(person_answers, bot_answers)
        shaken = done.taken[-1]
        named = {e.envelope.command_id for e in shaken.events}
        assert named == {chain[-1].command_id.replace("{version}", str(version))}
        seen[person_answers, bot_answers] = (_what_seat_sees(app, match_id, None),
                                             [(e.envelope.seq, e.envelope.command_id) for e in shaken.events])
        # a retry resolves every id as the first call did: each entry is its first answer
        again = app.submit_chain(match_id, chain, version)
        assert again.refusal is None and all(d.duplicate for d in again.taken)
        assert [d.version for d in again.taken][-1] == shaken.version
    assert all(what == seen[False, False] for what in seen.values())


_CHAT = pb.Command(send_chat=pb.SendChat(text="well?"))
_TYPE_URL = "type.googleapis.com/" + pb.Command.DESCRIPTOR.full_name


def _chatted_in_a_window(answered: bool):
    """A seat asked in a window chats (public, behind its slots); then, if `answered`, another
    seat asked there answers (held back): (app, match id, the asker's token, its seat, its chat
    as a chain entry). The same seeds each time: the same window."""
    from services.command.app import ChainedCommand

    app = bootstrap(store=InMemoryEventStore(), settings=SETTINGS)
    created, window = _window_match(app)
    match_id, tokens = created.match_id, created.seat_tokens
    other, asker = window.seats[0], window.seats[1]
    chat = pb.Command()
    chat.CopyFrom(_CHAT)
    chat.send_chat.to.append(other)
    entry = ChainedCommand(tokens[asker], "chat-1", _TYPE_URL, chat.SerializeToString())
    chatted = app.submit_chain(match_id, [entry])
    assert chatted.refusal is None and not chatted.taken[0].held
    if answered:
        assert _pass(app, match_id, tokens[other], "answer-1").held
    return app, match_id, tokens[asker], asker, entry


def test_np_h9_ask_next_after_a_retried_command_does_not_tell_whether_anyone_answered() -> None:
    """NP-H9, NP-D7: SubmitCommands' `next` is what GetView and ListLegalCommands would answer
    the asked seats, "when the match is still at the version the last command left". That was
    checked against the match's position, which counts the held answers: a seat asked in a
    window chats (public, behind its slots), then sends the chat again (a duplicate: where it
    left the match) asking about itself. Its `next` came back empty once another seat's answer
    was held, and with its own window decision otherwise, so it learnt whether the other had
    answered. The version the last command left is the one the table sees: held answers move
    none, and the seat's own decision does not depend on them."""
    from services.command.app import NextSeat

    seen = {}
    for answered in (False, True):
        app, match_id, token, asker, chat = _chatted_in_a_window(answered)
        again = app.submit_chain(match_id, [chat], ask_next=[NextSeat(token)])
        assert again.refusal is None and again.taken[0].duplicate
        seen[answered] = ([(n.seat, n.view.SerializeToString(deterministic=True),
                            [c.SerializeToString(deterministic=True) for c in n.legal], n.complete)
                           for n in again.next], again.next_version)
        assert [n.seat for n in again.next] == [asker]
    assert seen[True] == seen[False]


def test_np_h9_an_entry_after_a_retried_one_is_not_refused_for_the_answers_held_since() -> None:
    """NP-H9: a chain's entry goes in where the one before left the match. After a retried
    entry (a duplicate) that was its position then, and the answers held since, another
    seat's included, made the next entry stale: a seat asked in a window sent its chat again
    with a command the rules refuse behind it, and was told `stale_version` once another
    seat's answer was held, the rule's refusal otherwise (no move made either way). After a
    retried public entry the next one goes in at the version the table sees, as a
    SubmitCommand at the version that entry's answer gave would."""
    from services.command.app import ChainedCommand

    nothing = pb.Command(shakedown=pb.Shakedown()).SerializeToString()  # NP-M1: refused
    seen = {}
    for answered in (False, True):
        app, match_id, token, _asker, chat = _chatted_in_a_window(answered)
        again = app.submit_chain(match_id, [chat, ChainedCommand(token, "nothing", _TYPE_URL, nothing)])
        assert again.taken[0].duplicate and again.refused_at == 1
        seen[answered] = (again.refusal.status, again.refusal.code, again.refusal.message)
    assert seen[True] == seen[False]
    assert seen[False][1] == "NP-M1"


def test_a_command_set_aside_in_a_window_is_refused_whoever_has_answered_since() -> None:
    """The quarantine named a command's input by the match's position, which counts the answers
    held: a seat whose command was set aside in a window, sending it again under a new id, had it
    refused until another seat answered, then decided: told that a seat had answered, which
    nobody may count. It is named by the version every seat sees."""
    from famiglia.grpcutil.errors import FailedPrecondition
    from services.command.quarantine import id_name, input_name

    app = bootstrap(store=InMemoryEventStore(), settings=SETTINGS)
    created, window = _window_match(app)
    match_id, tokens = created.match_id, created.seat_tokens
    first, other = window.seats[0], window.seats[1]
    m = app.matches.get(match_id).match
    assert m.version == m.public_version  # nothing held yet: the stuck call's names either way
    stuck = pb.Command(**{"pass": pb.Pass()})
    app.quarantine.set_aside(match_id, [id_name(first, "stuck-1"), input_name(m.public_version, first, stuck)])
    with pytest.raises(FailedPrecondition) as refused:
        _pass(app, match_id, tokens[first], "again-1")
    assert refused.value.code == "command_quarantined"
    assert _pass(app, match_id, tokens[other], "answer-2").held  # another seat answers, held
    with pytest.raises(FailedPrecondition) as refused:
        _pass(app, match_id, tokens[first], "again-2")
    assert refused.value.code == "command_quarantined"


def test_np_h9_a_held_answer_this_server_cannot_read_is_not_named_by_its_seq() -> None:
    """A held answer of a kind only a newer server knows (a rolling deploy) makes the match
    unreadable here, as any event of such a kind does; the refusal named its seq, which every
    caller, a spectator too, reads against the version: a staged seq past it counts the answers
    held before it. A stream's event may be named (its seq is public), a staged one not."""
    store = InMemoryEventStore()
    app = bootstrap(store=store, settings=SETTINGS)
    created, window = _window_match(app)
    match_id, tokens = created.match_id, created.seat_tokens
    version = store.version(match_id)
    assert _pass(app, match_id, tokens[window.seats[0]], "answer-1").held
    # The second seat's answer, held by a newer replica: a kind this server's engine lacks.
    (first,) = store.read_staged(match_id, after=version)
    number = max(f.number for f in pb.Event.DESCRIPTOR.fields) + 1
    tag, varint = number << 3 | 2, b""
    while tag > 0x7F:
        varint, tag = varint + bytes([tag & 0x7F | 0x80]), tag >> 7
    newer = envelope_pb2.EventEnvelope()
    newer.CopyFrom(first)
    newer.seq, newer.seat, newer.command_id = first.seq + 1, window.seats[1], "answer-2"
    newer.type, newer.event_id = "future_kind", first.event_id + "F"
    newer.payload = varint + bytes([tag]) + b"\x00"
    newer.ClearField("command")
    store.stage(match_id, first.seq, [newer], command_key(window.seats[1], "answer-2"))
    for server in (app, bootstrap(store=store, settings=SETTINGS)):  # hot, and folded afresh
        with pytest.raises(FailedPrecondition) as refused:
            server.get_view(match_id, server.viewer(match_id, None))
        assert refused.value.code == "match_unreadable"
        said = refused.value.message
        assert f"event {newer.seq}" not in said and f"event {first.seq}" not in said, said
        assert said.endswith("its events cannot be read by this server's engine; the server's log "
                             "(match_unreadable) has the details"), said
