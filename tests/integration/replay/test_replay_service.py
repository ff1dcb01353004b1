"""ReplayService over real gRPC on a real redis-server, fed by the real command path."""

from __future__ import annotations

import itertools
import random

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from famiglia.cli import replay as cli
from famiglia.cli.main import main as famiglia_main
from famiglia.eventstore.envelopes import open_event
from famiglia.grpcutil.errors import error_code
from famiglia.replay.client import ReplayClient, operator_token
from famiglia.replay.export import dump, load
from famiglia.replay.sources import MemorySource
from famiglia.replay.toy import GAME_ID, toy_engine
from famiglia.v1 import replay_service_pb2 as pb

from ...unit.replay.games import registry
from .conftest import SECRET, Stack, play, start_replay

TOY_OPTIONS = {"turns": "24"}
pytestmark = pytest.mark.redis


def _unpack(any_message, engine):
    view = engine.info.view_type()
    assert any_message.Unpack(view)
    return view


def test_health_and_reflection_name_the_replay_service(stack: Stack) -> None:
    health = health_pb2_grpc.HealthStub(stack.client.channel)
    reply = health.Check(health_pb2.HealthCheckRequest(service="famiglia.v1.ReplayService"), timeout=5)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_state_at_any_event_is_the_askers_view_and_events_are_found_without_a_hint(stack: Stack) -> None:
    played = play(stack.commands, GAME_ID, 3, seed=5, options=TOY_OPTIONS)
    envelopes = stack.store.read(played.match_id)
    assert any(e.command for e in envelopes), "the command service records commands"
    engine = toy_engine()
    state = None
    for env in envelopes[1:]:
        state = engine.evolve(state, open_event(engine, env))
        if env.seq % 5:
            continue
        spectator = stack.client.state_at(env.event_id)
        assert spectator.match_id == played.match_id and spectator.seq == env.seq
        assert spectator.scope == pb.VIEW_SCOPE_SPECTATOR and spectator.seat == -1
        assert _unpack(spectator.view, engine) == engine.view(state, None)
        seat = stack.client.state_at(env.event_id, token=played.tokens[1])
        assert seat.scope == pb.VIEW_SCOPE_SEAT and _unpack(seat.view, engine) == engine.view(state, 1)
        assert [p.seat for p in seat.to_act] == [p.seat for p in engine.pending(state)]
        full = stack.client.state_at(env.event_id, full=True)
        assert full.text == engine.render_state(state) and len(full.seat_views) == 3


def test_a_seat_token_never_reveals_another_seats_cards_while_the_match_runs(stack: Stack) -> None:
    played = play(stack.commands, GAME_ID, 2, seed=8, options=TOY_OPTIONS, stop_after=8)
    last = stack.store.read(played.match_id)[-1]
    with pytest.raises(grpc.RpcError) as denied:
        stack.client.state_at(last.event_id, token=played.tokens[0], full=True)
    assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED and error_code(denied.value) == "match_running"
    engine = toy_engine()
    secrets_of_1 = _cards_dealt_or_drawn_by(engine, stack.store.read(played.match_id), seat=1)
    for step in stack.client.stream(match_id=played.match_id, token=played.tokens[0]):
        assert step.type not in ("deck_shuffled",)
        if step.type in ("hand_dealt", "card_taken"):
            event = engine.info.event_type()
            step.event.Unpack(event)
            assert getattr(event, step.type).seat == 0
        if step.HasField("view"):
            view = _unpack(step.view, engine)
            assert view.seat == 0 and not set(view.hand) & secrets_of_1  # cards are unique
    at = stack.client.state_at(last.event_id, token=played.tokens[0])
    assert not set(_unpack(at.view, engine).hand) & secrets_of_1
    own_hand_of_1 = set(_unpack(stack.client.state_at(last.event_id, token=played.tokens[1]).view, engine).hand)
    assert own_hand_of_1 and own_hand_of_1 <= secrets_of_1  # the check above had secrets to find


def _cards_dealt_or_drawn_by(engine, envelopes, seat: int) -> set[int]:
    """Every card that ever reached `seat`'s hand (Stash cards are unique)."""
    cards: set[int] = set()
    for env in envelopes[1:]:
        event = open_event(engine, env)
        if event.HasField("hand_dealt") and event.hand_dealt.seat == seat:
            cards.update(event.hand_dealt.cards)
        if event.HasField("card_taken") and event.card_taken.seat == seat:
            cards.add(event.card_taken.card)
    return cards


def test_list_match_events_pages_and_the_stream_covers_a_range(stack: Stack) -> None:
    played = play(stack.commands, GAME_ID, 2, seed=9, options=TOY_OPTIONS)
    envelopes = stack.store.read(played.match_id)
    listed = stack.client.events(played.match_id, page_size=7)
    assert [(e.event_id, e.seq) for e in listed] == [(e.event_id, e.seq) for e in envelopes]
    assert not any(e.hidden for e in listed)  # over: everything may be seen
    steps = list(stack.client.stream(event_id=envelopes[3].event_id, to_seq=12, full=True))
    assert [s.seq for s in steps] == list(range(5, 13))


def test_export_and_verify_by_id_check_the_callers_token_over_the_wire(stack: Stack) -> None:
    played = play(stack.commands, GAME_ID, 2, seed=14, options=TOY_OPTIONS)
    other = play(stack.commands, GAME_ID, 2, seed=15, options=TOY_OPTIONS, stop_after=1)
    assert stack.client.export(played.match_id, token=played.tokens[0]).events == played.version
    assert stack.client.verify(match_id=played.match_id, token=played.tokens[1]).ok
    for call in (lambda t: stack.client.export(played.match_id, token=t),
                 lambda t: stack.client.verify(match_id=played.match_id, token=t)):
        with pytest.raises(grpc.RpcError) as denied:
            call(other.tokens[0])
        assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED and error_code(denied.value) == "wrong_match"
        with pytest.raises(grpc.RpcError) as forged:
            call("forged.token")
        assert forged.value.code() == grpc.StatusCode.UNAUTHENTICATED and error_code(forged.value) == "bad_token"


def test_an_exported_match_verifies_and_a_tampered_one_fails_at_the_altered_event(stack: Stack, tmp_path) -> None:
    played = play(stack.commands, GAME_ID, 3, seed=12, options=TOY_OPTIONS)
    answer = stack.client.export(played.match_id)
    assert answer.events == played.version and answer.commands > 0
    assert stack.client.verify(data=answer.file).ok
    assert stack.client.verify(match_id=played.match_id).ok
    good = tmp_path / "good.json"
    good.write_bytes(answer.file)
    assert cli.verify_file(good, registry=registry()) == 0

    export = load(answer.file)
    victim = export.events[len(export.events) // 2]
    victim.payload += b"\x08\x01"
    bad = tmp_path / "bad.json"
    bad.write_bytes(dump(export))
    report = stack.client.verify(data=bad.read_bytes())
    assert not report.ok and report.divergence.seq == victim.seq
    assert cli.verify_file(bad, registry=registry()) == 1


def test_a_replay_from_the_archive_after_trimming_redis_equals_one_from_redis(stack: Stack) -> None:
    played = play(stack.commands, GAME_ID, 2, seed=21, options=TOY_OPTIONS)
    envelopes = stack.store.read(played.match_id)
    stack.cold.add(envelopes)  # the projection archived it

    def replay(client: ReplayClient) -> list:
        steps = [s.SerializeToString() for s in client.stream(match_id=played.match_id, full=True)]
        seat_views = [client.state_at(e.event_id, token=played.tokens[1]).SerializeToString() for e in envelopes]
        return [steps, seat_views, client.export(played.match_id).events]

    from_redis = replay(stack.client)
    assert stack.store.trim(played.match_id) == len(envelopes)
    server, address = start_replay(stack.store, stack.cold)  # a fresh process: nothing cached
    client = ReplayClient(address)
    try:
        assert replay(client) == from_redis
    finally:
        client.close()
        server.stop(grace=None)


def test_a_match_seen_running_then_finished_and_trimmed_is_read_from_the_archive(stack: Stack) -> None:
    """The service caches a match it was asked about while it ran; after the match ends and
    Redis trims it, the same service answers as a fresh one would (not stuck at the old end)."""
    created = stack.commands.create_match(GAME_ID, 2, seed=22, options=TOY_OPTIONS)
    chooser = random.Random(22)
    for n in itertools.count():
        m = stack.commands.matches.get(created.match_id).match
        if m.finished:
            break
        seat = chooser.choice(sorted({p.seat for p in m.engine.pending(m.state)}))
        viewer = stack.commands.viewer(created.match_id, created.seat_tokens[seat])
        stack.commands.submit(created.match_id, viewer, f"seen-{n}",
                              chooser.choice(stack.commands.legal_commands(created.match_id, viewer).commands))
        if n == 5:  # a spectator watches the running match through the replay service
            seen = stack.client.state_at(stack.store.read(created.match_id)[-1].event_id)
            assert not seen.match_finished
    envelopes = stack.store.read(created.match_id)
    stack.cold.add(envelopes)  # the projection archived it
    assert stack.store.trim(created.match_id) == len(envelopes)
    last = stack.client.state_at(envelopes[-1].event_id)
    assert last.match_finished and last.seq == last.last_seq == len(envelopes)
    assert len(list(stack.client.stream(match_id=created.match_id, full=True))) == len(envelopes)
    assert stack.client.export(created.match_id).events == len(envelopes)


def test_import_stores_an_export_under_a_new_id_that_replays_the_same(stack: Stack) -> None:
    played = play(stack.commands, GAME_ID, 2, seed=30, options=TOY_OPTIONS)
    data = stack.client.export(played.match_id, binary=True).file
    operator = operator_token(SECRET)
    answer = stack.client.import_file(data, token=operator, new_match_id="m-copy")
    assert answer.match_id == "m-copy" and answer.verification.ok and answer.version == played.version
    original = [s.event_text for s in stack.client.stream(match_id=played.match_id, full=True)]
    copied = [s.event_text for s in stack.client.stream(match_id="m-copy", full=True)]
    assert copied == original
    with pytest.raises(grpc.RpcError) as again:
        stack.client.import_file(data, token=operator, new_match_id="m-copy")
    assert again.value.code() == grpc.StatusCode.ALREADY_EXISTS


def test_import_needs_an_operator_token_over_the_wire(stack: Stack) -> None:
    played = play(stack.commands, GAME_ID, 2, seed=31, options=TOY_OPTIONS)
    data = stack.client.export(played.match_id, binary=True).file
    refusals = {
        None: (grpc.StatusCode.UNAUTHENTICATED, "no_token"),
        "not.a-token": (grpc.StatusCode.UNAUTHENTICATED, "bad_token"),
        operator_token("another-secret"): (grpc.StatusCode.UNAUTHENTICATED, "bad_token"),
        played.tokens[0]: (grpc.StatusCode.PERMISSION_DENIED, "operator_only"),
    }
    for token, (status, code) in refusals.items():
        with pytest.raises(grpc.RpcError) as refused:
            stack.client.import_file(data, token=token, new_match_id="m-anon")
        assert (refused.value.code(), error_code(refused.value)) == (status, code), token
    assert stack.store.read("m-anon") == []
    # A stored copy never shares an event id with its original, even under the original's own id.
    stack.client.import_file(data, token=operator_token(SECRET), new_match_id="m-op")
    assert not {e.event_id for e in stack.store.read("m-op")} & {e.event_id for e in stack.store.read(played.match_id)}


def test_import_refuses_unreadable_events_even_unverified_over_the_wire(stack: Stack) -> None:
    played = play(stack.commands, GAME_ID, 2, seed=32, options=TOY_OPTIONS)
    export = load(stack.client.export(played.match_id, binary=True).file)
    export.events[5].timestamp.seconds = 2**62
    with pytest.raises(grpc.RpcError) as refused:
        stack.client.import_file(dump(export, binary=True), token=operator_token(SECRET), new_match_id="m-time",
                                 allow_unverified=True)
    assert (refused.value.code(), error_code(refused.value)) == (grpc.StatusCode.INVALID_ARGUMENT, "bad_export")


def test_hidden_events_show_neither_seat_nor_time_over_the_wire(stack: Stack) -> None:
    played = play(stack.commands, GAME_ID, 2, seed=34, options=TOY_OPTIONS, stop_after=8)
    envelopes = {e.seq: e for e in stack.store.read(played.match_id)}
    listed = stack.client.events(played.match_id, token=played.tokens[0])
    hidden = [e for e in listed if e.hidden]
    assert any(envelopes[e.seq].seat == 1 for e in hidden), "seat 1's own secret actions are hidden from seat 0"
    assert all((e.seat, e.timestamp_ms, e.command_id, e.type) == (-1, 0, "", "") for e in hidden)
    # Nor its id: a ULID begins with the millisecond the event was made.
    assert all(e.event_id == "" for e in hidden)
    assert all(e.event_id == envelopes[e.seq].event_id for e in listed if not e.hidden)
    # A shown event of a command that also made a hidden one names neither its seat nor command.
    partly = {(envelopes[e.seq].seat, envelopes[e.seq].command_id) for e in hidden if envelopes[e.seq].command_id}
    unattributed = 0
    for e in listed:
        if not e.hidden:
            env = envelopes[e.seq]
            assert e.timestamp_ms == env.timestamp.ToMilliseconds()
            if (env.seat, env.command_id) in partly:
                assert (e.seat, e.command_id) == (-1, "")
                unattributed += 1
            else:  # a command id only for the asker's own commands (NP-H9)
                assert (e.seat, e.command_id) == (env.seat, env.command_id if env.seat == 0 else "")
    assert unattributed, "seat 1 has a command with a secret part and a public part"


def test_np_h9_command_ids_are_shown_to_their_own_seat_until_the_match_is_over(stack: Stack) -> None:
    """A command id is its sender's idempotency key (a bots task's names the turn it played)."""
    running = play(stack.commands, GAME_ID, 2, seed=36, options=TOY_OPTIONS, stop_after=8)
    envelopes = {e.seq: e for e in stack.store.read(running.match_id)}
    assert {e.seat for e in envelopes.values() if e.command_id} >= {0, 1}
    for viewer, token in ((0, running.tokens[0]), (1, running.tokens[1]), (None, None)):
        listed = [e for e in stack.client.events(running.match_id, token=token) if not e.hidden]
        steps = list(stack.client.stream(match_id=running.match_id, token=token))
        for seq, seat, command_id in [(e.seq, e.seat, e.command_id) for e in listed] + [
                (s.seq, s.seat, s.command_id) for s in steps]:
            env = envelopes[seq]
            own = viewer is not None and env.seat == viewer and seat == env.seat
            assert command_id == (env.command_id if own else ""), (viewer, seq)
        assert viewer is None or any(e.command_id for e in listed), "the asker's own ids are shown"
    over = play(stack.commands, GAME_ID, 2, seed=37, options=TOY_OPTIONS)
    stored = stack.store.read(over.match_id)
    assert [e.command_id for e in stack.client.events(over.match_id)] == [e.command_id for e in stored]
    full = {s.seq: s.command_id for s in stack.client.stream(match_id=over.match_id, full=True)}
    assert full == {e.seq: e.command_id for e in stored if e.seq in full} and any(full.values())


def test_the_cli_imports_with_an_operator_token_minted_from_the_secret(stack: Stack, tmp_path, monkeypatch) -> None:
    played = play(stack.commands, GAME_ID, 2, seed=35, options=TOY_OPTIONS)
    path = tmp_path / "match.json"
    path.write_bytes(stack.client.export(played.match_id).file)
    monkeypatch.setenv("FAMIGLIA_SECRET", SECRET)
    assert famiglia_main(["replay", "import", str(path), "--as", "m-cli", "--address", stack.address]) == 0
    assert len(stack.store.read("m-cli")) == played.version
    monkeypatch.setenv("FAMIGLIA_SECRET", "not-the-servers-secret")
    assert famiglia_main(["replay", "import", str(path), "--as", "m-cli2", "--address", stack.address]) == 2
    assert stack.store.read("m-cli2") == []


def test_the_cli_steps_forward_and_back_and_exports(stack: Stack, tmp_path) -> None:
    played = play(stack.commands, GAME_ID, 2, seed=40, options=TOY_OPTIONS)
    envelopes = stack.store.read(played.match_id)
    keys = iter(["n", "n", "p", "x", "q"])
    shown: list[str] = []

    class Out:
        def print(self, *items, **_):
            shown.extend(str(getattr(i, "title", i)) for i in items)

    assert cli.step_through(stack.client, envelopes[5].event_id, ask=lambda _: next(keys), out=Out()) == 0
    seqs = [line.split("event ")[1].split("/")[0] for line in shown if "event " in line]
    assert seqs == ["6", "7", "8", "7", "7"]  # an unknown key shows the help and the same event
    out = tmp_path / "match.json"
    assert famiglia_main(["replay", "export", played.match_id, "-o", str(out), "--address", stack.address]) == 0
    assert load(out.read_bytes()).match_id == played.match_id


def test_no_match_no_event_no_service(stack: Stack) -> None:
    with pytest.raises(grpc.RpcError) as missing:
        stack.client.state_at("01NOSUCHEVENT0000000000000")
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as nothing:
        list(stack.client.stream())
    assert nothing.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert MemorySource().find("x") is None


@pytest.mark.parametrize("game_id", [g for g in registry() if g != GAME_ID])
def test_every_registered_game_played_through_the_command_service_exports_and_verifies(
        stack: Stack, game_id: str) -> None:
    engine = registry().get(game_id)
    played = play(stack.commands, game_id, engine.info.min_players, seed=2)
    answer = stack.client.export(played.match_id)
    report = stack.client.verify(data=answer.file)
    assert report.ok, report
    assert report.events_checked == played.version and report.commands_checked == answer.commands


def test_an_export_past_the_servers_8_mib_is_imported_back(stack: Stack) -> None:
    """A long match's JSON export (~20k events) passes 8 MiB, the receive limit of every other
    service: ImportMatch was refused RESOURCE_EXHAUSTED by gRPC, with no code, so an export could
    not be imported back. The replay service receives what its client receives, FILE_MAX_BYTES."""
    from famiglia.grpcutil.server import MAX_RECEIVE_BYTES
    from famiglia.replay.export import FILE_MAX_BYTES

    played = play(stack.commands, GAME_ID, 2, seed=33, options=TOY_OPTIONS)
    data = stack.client.export(played.match_id, binary=False).file
    long = data + b" " * (MAX_RECEIVE_BYTES + 1024 - len(data))  # the same JSON, past 8 MiB
    assert MAX_RECEIVE_BYTES < len(long) < FILE_MAX_BYTES
    answer = stack.client.import_file(long, token=operator_token(SECRET), new_match_id="m-long")
    assert answer.match_id == "m-long" and answer.verification.ok and answer.version == played.version


def test_a_file_past_the_export_limit_is_refused_with_a_code_over_the_wire(stack: Stack) -> None:
    """A file past FILE_MAX_BYTES was refused by gRPC itself, RESOURCE_EXHAUSTED with no code and
    a message about messages: a client other than the CLI could not tell it from a server out of
    memory. The server now receives a margin more, and the handler refuses such a file
    `file_too_large`, naming the limit and the way (the binary export); only a request past that
    margin too is gRPC's bare refusal (README)."""
    from famiglia.replay.export import FILE_MAX_BYTES, MESSAGE_MAX_BYTES

    token = operator_token(SECRET)
    at_limit = b" " * FILE_MAX_BYTES
    with pytest.raises(grpc.RpcError) as read:  # read by the handler: no export, but not too large
        stack.client.import_file(at_limit, token=token, new_match_id="m-at-limit")
    assert read.value.code() == grpc.StatusCode.INVALID_ARGUMENT and error_code(read.value) == "bad_export"
    past = at_limit + b" "
    for call in (lambda: stack.client.import_file(past, token=token, new_match_id="m-past"),
                 lambda: stack.client.verify(data=past)):
        with pytest.raises(grpc.RpcError) as refused:
            call()
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_code(refused.value) == "file_too_large"
        assert "64 MiB" in refused.value.details() and "binary" in refused.value.details()
    with pytest.raises(grpc.RpcError) as beyond:
        stack.client.verify(data=b" " * (MESSAGE_MAX_BYTES + 1))
    assert beyond.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and error_code(beyond.value) == ""
    assert stack.client.events(play(stack.commands, GAME_ID, 2, seed=5, options=TOY_OPTIONS).match_id)


def test_an_export_past_the_file_limit_is_refused_with_a_code(stack: Stack, monkeypatch) -> None:
    """ExportMatch sent a file of any size, and a client (whose receive limit is the file limit)
    refused one past it RESOURCE_EXHAUSTED, no code: a match too long to export read as a
    transport failure. Now the server refuses it `export_too_large` (here with the limit lowered
    between the match's binary and JSON sizes: its binary export still goes)."""
    from services.replay.entrypoints import grpc_server

    played = play(stack.commands, GAME_ID, 2, seed=33, options=TOY_OPTIONS)
    binary = len(stack.client.export(played.match_id, binary=True).file)
    json = len(stack.client.export(played.match_id).file)
    assert binary < json
    monkeypatch.setattr(grpc_server, "FILE_MAX_BYTES", (binary + json) // 2)
    with pytest.raises(grpc.RpcError) as refused:
        stack.client.export(played.match_id)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_code(refused.value) == "export_too_large" and "binary" in refused.value.details()
    assert len(stack.client.export(played.match_id, binary=True).file) == binary
    monkeypatch.setattr(grpc_server, "FILE_MAX_BYTES", binary - 1)
    with pytest.raises(grpc.RpcError) as too_long:
        stack.client.export(played.match_id, binary=True)
    assert error_code(too_long.value) == "export_too_large"


def test_the_cli_refuses_a_file_past_the_import_limit_before_sending_it(tmp_path) -> None:
    """Past FILE_MAX_BYTES the service refuses the file (`file_too_large`, or past its margin
    gRPC's RESOURCE_EXHAUSTED, no code): the CLI names the limit and the way (--binary) instead,
    and sends nothing."""
    from rich.console import Console

    from famiglia.cli.replay import import_file
    from famiglia.replay.export import FILE_MAX_BYTES

    big = tmp_path / "long.json"
    with big.open("wb") as sparse:
        sparse.truncate(FILE_MAX_BYTES + 1)

    class Unsent:
        def import_file(self, *_args, **_kwargs):  # type: ignore[no-untyped-def]
            raise AssertionError("sent")

    out = Console(record=True, width=200)
    assert import_file(Unsent(), big, token="t", out=out) == 2
    said = out.export_text()
    assert "64 MiB" in said and "--binary" in said
