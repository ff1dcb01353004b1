"""Command-service rules that a mutation of the code once changed without any other test
noticing: listings, retries on a lagging replica, reads cut mid-command, id and token limits,
what goes out on the wire for held and unattributed events, the fold's blocks."""

from __future__ import annotations

import random

import pytest

from famiglia.auth import InvalidToken, TokenSigner
from famiglia.config import Settings
from famiglia.engine.registry import default_registry
from famiglia.eventstore.envelopes import game_envelopes, open_event
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.grpcutil.errors import FailedPrecondition, InvalidArgument
from famiglia.matchstate import MatchState
from famiglia.v1 import envelope_pb2
from services.command.app import CommandApp, SeatEvent
from services.command.bootstrap import bootstrap
from services.command.entrypoints.grpc_server import _seat_event

SETTINGS = Settings(secret="review-secret")
REGISTRY = default_registry()


def _pending_move(app: CommandApp, match_id: str, tokens: list[str]):
    hot = app.matches.get(match_id)
    with hot.lock:
        app.matches.catch_up(hot)
    m = hot.match
    seat = m.engine.pending(m.state)[0].seat
    viewer = app.viewer(match_id, tokens[seat])
    return viewer, app.legal_commands(match_id, viewer).commands[0]


def _two_replicas():
    store = InMemoryEventStore()
    return store, bootstrap(store=store, settings=SETTINGS), bootstrap(store=store, settings=SETTINGS)


# -- M04: _complete `len(commands) < cap` -> `<=` ----------------------------------------------
def test_a_listing_cut_at_the_clients_limit_is_not_complete() -> None:
    from famiglia.engine.protocol import Sampled

    app = bootstrap(store=InMemoryEventStore(), settings=SETTINGS)
    created = app.create_match("nostra_city", 3, seed=5)
    match_id, tokens = created.match_id, created.seat_tokens
    rng = random.Random(5)
    for step in range(500):
        viewer, _ = _pending_move(app, match_id, tokens)
        every = app.legal_commands(match_id, viewer)
        if every.complete and len(every.commands) >= 2:
            break
        app.submit(match_id, viewer, f"w{step}", rng.choice(every.commands))
    else:
        raise AssertionError("no enumerated choice of two or more commands")
    cut = app.legal_commands(match_id, viewer, limit=1)
    assert len(cut.commands) == 1 and not isinstance(cut.commands, Sampled)
    assert not cut.complete


# -- M05: the duplicate check after a lagging replica catches up on a stale-looking version ----
def test_a_retry_on_a_lagging_replica_with_the_version_it_was_sent_at_is_its_first_answer() -> None:
    store, one, two = _two_replicas()
    created = one.create_match("grifters", 2, seed=5)
    match_id, tokens = created.match_id, created.seat_tokens
    two.get_view(match_id, two.viewer(match_id, None))  # the second replica stops here
    viewer, command = _pending_move(one, match_id, tokens)
    one.submit(match_id, viewer, "c0", command)
    at = store.version(match_id)
    viewer, command = _pending_move(one, match_id, tokens)
    first = one.submit(match_id, viewer, "c1", command, expected_version=at)
    again = two.submit(match_id, two.viewer(match_id, tokens[viewer.seat]), "c1", command, expected_version=at)
    assert again.duplicate and again.version == first.version


# -- retry on a lagging replica (does not kill M11: equivalent, the stores answer a duplicate first)--------------------------------------
def test_a_retry_without_a_version_on_a_lagging_replica_is_its_first_answer() -> None:
    """Replica two, behind, gets the retry of a command replica one took, which its own
    (stale) state still allows: the write conflicts, two catches up and must answer the first
    answer, even though the command is refused on the state after it."""
    from famiglia.engine import Rng
    from famiglia.engine.errors import RuleViolation

    store, one, two = _two_replicas()
    created = one.create_match("nostra_city", 3, seed=5)
    match_id, tokens = created.match_id, created.seat_tokens
    rng = random.Random(5)
    for step in range(500):
        two.get_view(match_id, two.viewer(match_id, None))  # two is caught up to here
        viewer, _ = _pending_move(one, match_id, tokens)
        command = rng.choice(one.legal_commands(match_id, viewer).commands)
        first = one.submit(match_id, viewer, f"c{step}", command)
        m = one.matches.get(match_id).match
        try:
            m.engine.decide(m.state, viewer.seat, command, Rng.derive(m.seed, m.version))
        except RuleViolation:
            break  # refused once taken: the case
    else:
        raise AssertionError("no command refused after it was taken")
    again = two.submit(match_id, two.viewer(match_id, tokens[viewer.seat]), f"c{step}", command)
    assert again.duplicate and again.version == first.version
    assert store.version(match_id) == first.version


# -- M17: a read of 500 events never cuts a command in two ------------------------------------
def test_a_command_cut_by_a_full_read_is_still_unattributed_to_a_spectator() -> None:
    store = InMemoryEventStore()
    app = bootstrap(store=store, settings=SETTINGS)
    for seed in range(1, 20):
        created = app.create_match("nothing_personal", 3, seed=seed)
        match_id, tokens = created.match_id, created.seat_tokens
        rng = random.Random(seed)
        target = None
        for step in range(20000):
            m = app.matches.get(match_id).match
            if m.finished:
                break
            seat = rng.choice([p.seat for p in m.engine.pending(m.state)])
            viewer = app.viewer(match_id, tokens[seat])
            before = store.version(match_id)
            app.submit(match_id, viewer, f"c{step}", rng.choice(app.legal_commands(match_id, viewer, limit=32).commands))
            envs = [e for e in store.read(match_id, after=before) if e.command_id == f"c{step}"]
            hidden = [m.engine.redact(open_event(m.engine, e), None) is None for e in envs]
            for i, h in enumerate(hidden[:-1]):
                if h and not hidden[i + 1] and envs[i].seq > 501:
                    target = (envs[i].seq, f"c{step}")
                    break
            if target:
                break
        if target:
            break
    else:
        pytest.skip("no long enough match with a mixed command")
    cut_at, command_id = target
    spectator = app.viewer(match_id, None)
    # the first read (500 events) ends at the command's hidden event: the rest comes next
    seen = [e for e, _v, _f in app.events(match_id, spectator, cut_at - 500, follow=False)
            if e is not None and e.envelope.command_id == command_id]
    assert seen and all(e.unattributed for e in seen)


# -- M22: command_id is at most 128 characters ------------------------------------------------
def test_a_command_id_of_129_characters_is_refused_and_128_taken() -> None:
    app = bootstrap(store=InMemoryEventStore(), settings=SETTINGS)
    created = app.create_match("grifters", 2, seed=5)
    viewer, command = _pending_move(app, created.match_id, created.seat_tokens)
    with pytest.raises(InvalidArgument) as exc:
        app.submit(created.match_id, viewer, "x" * 129, command)
    assert exc.value.code == "bad_command_id"
    assert not app.submit(created.match_id, viewer, "x" * 128, command).duplicate


# -- M48: a token is read only as its own kind ------------------------------------------------
def test_a_seat_token_is_not_a_player_token() -> None:
    signer = TokenSigner("review-secret")
    with pytest.raises(InvalidToken):
        signer.read_player(signer.seat_token("m1", 0, "p-alice"))
    with pytest.raises(InvalidToken):
        signer.read_seat(signer.player_token("p-alice"))


# -- M49 / M50: what goes on the wire for a held or unattributed event ------------------------
def _envelope() -> envelope_pb2.EventEnvelope:
    return envelope_pb2.EventEnvelope(event_id="e1", match_id="m1", seq=42, type="window_answered", seat=2,
                                      command_id="secret-cmd", payload_type="x.Y", payload=b"")


def test_a_held_event_goes_out_with_seq_zero() -> None:
    env = _envelope()
    out = _seat_event(SeatEvent(env, env, "t", stored=True, held=True))
    assert out.seq == 0
    assert _seat_event(SeatEvent(env, env, "t", stored=True)).seq == 42


def test_an_unattributed_event_goes_out_without_its_seat_or_command_id() -> None:
    env = _envelope()
    out = _seat_event(SeatEvent(env, env, "t", stored=True, unattributed=True))
    assert (out.seat, out.command_id) == (-1, "")
    shown = _seat_event(SeatEvent(env, env, "t", stored=True, foreign=False))
    assert (shown.seat, shown.command_id) == (2, "secret-cmd")


def test_another_seats_event_goes_out_without_its_command_id() -> None:
    """NP-H9: a command id is its client's to choose (a bots task's names its turn)."""
    env = _envelope()
    assert (_seat_event(SeatEvent(env, env, "t", stored=True)).seat,
            _seat_event(SeatEvent(env, env, "t", stored=True)).command_id) == (2, "")


# -- M38: a run of padding (as matches wrote them before slots) is one run --------------------
def test_past_padding_skips_a_whole_run_of_legacy_padding() -> None:
    app = bootstrap(store=InMemoryEventStore(), settings=SETTINGS)
    bots = [envelope_pb2.SeatInfo(seat=s, bot=True) for s in range(3)]
    created = app.create_match("nothing_personal", 3, seed=3, seat_info=bots)
    store = app.store
    envelopes = store.read(created.match_id)
    engine = REGISTRY.get("nothing_personal")
    version = envelopes[-1].seq
    padding = engine.info.padding_event()
    run = game_envelopes(engine, created.match_id, version, [padding, padding])
    match = MatchState.from_envelopes(REGISTRY, [*envelopes, *run])
    assert not match.may_hold
    assert match.past_padding(version) == version + 2


# -- M39: a block is a run of consecutive slot events -----------------------------------------
def test_every_block_the_fold_records_is_made_of_consecutive_slot_events() -> None:
    from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb
    from tests.unit.command.test_held_answers import _to_a_window

    checked = 0
    for seed in range(1, 12):
        store = InMemoryEventStore()
        app = bootstrap(store=store, settings=SETTINGS)
        created = app.create_match("nothing_personal", 3, seed=seed)
        match_id, tokens = created.match_id, created.seat_tokens
        rng = random.Random(seed)
        for round_ in range(6):
            window = _to_a_window(app, match_id, tokens, rng, asked=2, prefix=f"w{round_}")
            if window is None:
                break
            for seat in sorted(window.seats, reverse=True):  # answer in varying orders
                try:
                    app.submit(match_id, app.viewer(match_id, tokens[seat]), f"a{round_}-{seat}",
                               pb.Command(**{"pass": pb.Pass()}))
                except FailedPrecondition:
                    pass
        engine = REGISTRY.get("nothing_personal")
        slot_kinds = engine.info.held_events | {engine.info.held_padding}
        m = MatchState.from_envelopes(REGISTRY, store.read(match_id))
        by_seq = {e.seq: e for e in store.read(match_id)}
        for before, after in m.padded.items():
            assert all(by_seq[s].type in slot_kinds for s in range(before + 1, after + 1)), (before, after)
            checked += 1
    assert checked


# -- a held answer retried on a lagging replica (M11 likewise equivalent)------------------
def test_a_held_answer_retried_on_a_lagging_replica_is_its_first_answer() -> None:
    """The store's staging does not know staged command ids as duplicates: the second
    replica's stage conflicts, it catches up, and must answer the first (held) answer, not
    decide the answer again (refused: the seat has answered)."""
    from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb
    from tests.unit.command.test_held_answers import _window_match

    store = InMemoryEventStore()
    one = bootstrap(store=store, settings=SETTINGS)
    created, window = _window_match(one)
    match_id, tokens = created.match_id, created.seat_tokens
    two = bootstrap(store=store, settings=SETTINGS)
    two.get_view(match_id, two.viewer(match_id, None))
    passing = pb.Command(**{"pass": pb.Pass()})
    seat = window.seats[0]
    first = one.submit(match_id, one.viewer(match_id, tokens[seat]), "answer", passing)
    assert first.held
    again = two.submit(match_id, two.viewer(match_id, tokens[seat]), "answer", passing)
    assert again.duplicate and again.held and again.version == first.version
