"""The command service where a stream starts inside a command, a chain of held answers is
retried, and a replica lags the store."""

from __future__ import annotations

import random

from famiglia.config import Settings
from famiglia.eventstore.envelopes import open_event
from famiglia.eventstore.memory_store import InMemoryEventStore
from services.command.app import ChainedCommand, CommandApp, NextSeat
from services.command.bootstrap import bootstrap

SETTINGS = Settings(secret="unit-test-secret")


def _mixed_command(app: CommandApp, store, game_id: str, seats: int, seed: int = 3):
    """Random play until a command has an event hidden from a spectator followed by one it
    sees: (match id, the hidden event's seq, the command id)."""
    created = app.create_match(game_id, seats, seed=seed)
    match_id, tokens = created.match_id, created.seat_tokens
    rng = random.Random(1)
    for step in range(3000):
        m = app.matches.get(match_id).match
        assert not m.finished
        seat = rng.choice([p.seat for p in m.engine.pending(m.state)])
        viewer = app.viewer(match_id, tokens[seat])
        before = store.version(match_id)
        app.submit(match_id, viewer, f"c{step}", rng.choice(app.legal_commands(match_id, viewer, limit=32).commands))
        envs = [e for e in store.read(match_id, after=before) if e.command_id == f"c{step}"]
        hidden = [m.engine.redact(open_event(m.engine, e), None) is None for e in envs]
        for i, h in enumerate(hidden[:-1]):
            if h and not all(hidden[i + 1:]):
                return match_id, envs[i].seq, f"c{step}"
    raise AssertionError("no command with a hidden event before a public one")


def test_streaming_from_inside_a_command_does_not_name_its_seat() -> None:
    """StreamEvents from a version inside a command whose earlier events are hidden from the
    viewer must still show its visible events unattributed (seat -1, no command id), as a
    stream from the start does; otherwise `from_version` = the hidden event's seq tells a
    spectator who made the command (e.g. who answered a Nothing Personal window)."""
    store = InMemoryEventStore()
    app = bootstrap(store=store, settings=SETTINGS)
    match_id, hidden_seq, command_id = _mixed_command(app, store, "nostra_city", 3)
    spectator = app.viewer(match_id, None)
    whole = {e.envelope.seq: e.unattributed for e, _v, _f in app.events(match_id, spectator, 0, follow=False)
             if e is not None and e.envelope.command_id == command_id}
    assert whole and all(whole.values())
    resumed = {e.envelope.seq: e.unattributed
               for e, _v, _f in app.events(match_id, spectator, hidden_seq, follow=False)
               if e is not None and e.envelope.command_id == command_id}
    assert resumed and all(resumed.values()), resumed


def test_a_retried_chain_of_held_answers_is_answered_as_the_first_time() -> None:
    """A chain answering a window for its seats in the game's order (as the bots worker sends
    it), retried after its last entry wrote the held answers out in seat order at new seqs:
    every entry must be a duplicate again. The first entry's duplicate reports its written-out
    seq as its position, so "{version}" in the next entry's id resolves to another id and the
    retry is refused as stale_version (a window whose first seat is not seat 0)."""
    from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb
    from tests.unit.command.test_held_answers import _to_a_window

    for seed in range(1, 30):
        store = InMemoryEventStore()
        app = bootstrap(store=store, settings=SETTINGS)
        created = app.create_match("nothing_personal", 3, seed=seed)
        match_id, tokens = created.match_id, created.seat_tokens
        window = _to_a_window(app, match_id, tokens, random.Random(seed), 2)
        if window is not None and list(window.seats)[0] != 0:
            break
    else:
        raise AssertionError("no window whose first seat is not seat 0")
    version = store.version(match_id)
    passing = pb.Command(**{"pass": pb.Pass()}).SerializeToString()
    type_url = "type.googleapis.com/" + pb.Command.DESCRIPTOR.full_name
    chain = [ChainedCommand(tokens[s], f"bot:{{version}}:{s}", type_url, passing) for s in window.seats]
    first = app.submit_chain(match_id, chain, version)
    assert first.refusal is None and len(first.taken) == len(chain)
    again = app.submit_chain(match_id, chain, version)
    assert again.refusal is None, (again.refused_at, again.refusal.code)
    assert all(d.duplicate for d in again.taken)


def test_an_ask_only_chain_on_a_lagging_replica_is_answered_at_the_stores_version() -> None:
    """SubmitCommands with only ask_next, on a replica that has not folded another replica's
    command: it must answer as GetView would (the store's version), and refuse a stale
    expected_version with ABORTED, not answer the old state's decisions as current."""
    import pytest

    from famiglia.grpcutil.errors import Aborted

    store = InMemoryEventStore()
    one, two = bootstrap(store=store, settings=SETTINGS), bootstrap(store=store, settings=SETTINGS)
    created = one.create_match("grifters", 2, seed=5)
    match_id, tokens = created.match_id, created.seat_tokens
    two.get_view(match_id, two.viewer(match_id, None))  # loaded on the second replica
    old = store.version(match_id)
    m = one.matches.get(match_id).match
    seat = m.engine.pending(m.state)[0].seat
    viewer = one.viewer(match_id, tokens[seat])
    one.submit(match_id, viewer, "x1", one.legal_commands(match_id, viewer).commands[0])
    assert store.version(match_id) > old
    ask = [NextSeat(t, view=False) for t in tokens]
    with pytest.raises(Aborted):
        two.submit_chain(match_id, [], old, ask_next=ask)
    assert two.submit_chain(match_id, [], None, ask_next=ask).next_version == store.version(match_id)


def test_a_retried_chain_of_held_answers_without_a_version_is_answered_not_an_internal_error() -> None:
    """The same retry with no expected_version and plain command ids: the first entry's
    duplicate was "slotted" (its answer written out since), and the chain's next position was
    computed as None + slotted, a TypeError, answered as INTERNAL."""
    from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb
    from tests.unit.command.test_held_answers import _to_a_window

    for seed in range(1, 30):
        store = InMemoryEventStore()
        app = bootstrap(store=store, settings=SETTINGS)
        created = app.create_match("nothing_personal", 3, seed=seed)
        match_id, tokens = created.match_id, created.seat_tokens
        window = _to_a_window(app, match_id, tokens, random.Random(seed), 2)
        if window is not None and len(window.seats) >= 2:
            break
    else:
        raise AssertionError("no window of two seats or more")
    passing = pb.Command(**{"pass": pb.Pass()}).SerializeToString()
    type_url = "type.googleapis.com/" + pb.Command.DESCRIPTOR.full_name
    chain = [ChainedCommand(tokens[s], f"answer-{s}", type_url, passing) for s in window.seats]
    first = app.submit_chain(match_id, chain, store.version(match_id))
    assert first.refusal is None and len(first.taken) == len(chain)
    again = app.submit_chain(match_id, chain, None)
    assert again.refusal is None, (again.refused_at, again.refusal.code)
    assert all(d.duplicate for d in again.taken)
    assert [d.position for d in again.taken] == [d.position for d in first.taken]


def test_a_stream_follows_the_hot_match_kept_not_one_dropped_under_it() -> None:
    """The hot matches are bounded (count, bytes): a match followed by a stream may be dropped
    while the stream waits, and folded anew for its next command. The stream caught up the
    entry it took at its start, a second fold of the match that no bound counted, kept for as
    long as the stream lived (a person's, hours): it takes the match kept now at each pass."""
    store = InMemoryEventStore()
    served = bootstrap(store=store, settings=SETTINGS)
    app = CommandApp(store=store, registry=served.registry, signer=served.signer, hot_matches=1)
    created = app.create_match("nostra_city", 3, seed=5)
    match_id = created.match_id
    caught_up: list[bool] = []
    real_catch_up = app.matches.catch_up

    def catch_up(hot):  # type: ignore[no-untyped-def]
        kept = app.matches._running.get(match_id) or app.matches._finished.get(match_id)
        caught_up.append(hot.match.match_id != match_id or hot is kept)
        return real_catch_up(hot)

    app.matches.catch_up = catch_up  # type: ignore[method-assign]
    spectator = app.viewer(match_id, None)
    stream = app.events(match_id, spectator, store.version(match_id) - 1, follow=True, poll_ms=1,
                        is_active=lambda: not caught_up)  # ends after its first pass with nothing new
    assert next(stream)[0] is not None  # the last event: the stream waits for the next
    other = app.create_match("nostra_city", 3, seed=6)
    app.matches.get(other.match_id)  # the one hot match now: the followed one dropped
    m = app.matches.get(match_id).match  # folded anew
    seat = m.engine.pending(m.state)[0].seat
    viewer = app.viewer(match_id, created.seat_tokens[seat])
    app.submit(match_id, viewer, "c1", app.legal_commands(match_id, viewer).commands[0])
    caught_up.clear()
    assert [e for e, _v, _f in stream if e is not None]  # the command's events, then a pass with nothing new
    assert caught_up and all(caught_up), "a fold the hot matches no longer hold was caught up"
