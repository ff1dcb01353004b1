"""The command service's metrics, recorded by real commands (real bootstrap, in-memory store)."""

from __future__ import annotations

import pytest

from famiglia.config import Settings
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.grpcutil.errors import Aborted, FailedPrecondition, InvalidArgument, NotFound, Unauthenticated
from services.command.app import MAX_CHAIN, ChainedCommand, CommandApp, NextSeat
from services.command.bootstrap import bootstrap
from tests.support.metrics import recorded

SETTINGS = Settings(secret="unit-test-secret")
GAME = "goodcritters"
_TYPE_URL = "type.googleapis.com/"


def _pending_move(app: CommandApp, match_id: str, tokens: list[str]):
    """(the pending seat's viewer, one of its legal commands, a seat that is not asked)."""
    m = app.matches.get(match_id).match
    seat = m.engine.pending(m.state)[0].seat
    viewer = app.viewer(match_id, tokens[seat])
    other = next(s for s in range(m.seats) if s not in {p.seat for p in m.engine.pending(m.state)})
    return viewer, app.legal_commands(match_id, viewer).commands[0], app.viewer(match_id, tokens[other])


def test_commands_accepted_and_refused_are_counted_by_game_and_code() -> None:
    with recorded() as seen:
        app = bootstrap(store=InMemoryEventStore(), settings=SETTINGS)
        created = app.create_match(GAME, 4, seed=3)
        viewer, command, idle = _pending_move(app, created.match_id, created.seat_tokens)
        with pytest.raises(FailedPrecondition) as refused:
            app.submit(created.match_id, idle, "c-idle", command)  # not this seat's turn
        app.submit(created.match_id, viewer, "c-1", command)
        app.submit(created.match_id, viewer, "c-1", command)  # a retry: answered, not counted again
        with pytest.raises(NotFound):
            app.submit("m-nowhere", viewer, "c-2", command)
    assert seen.value("famiglia.command.accepted", game=GAME) == 1
    assert seen.value("famiglia.command.refused", game=GAME, code=refused.value.code) == 1
    assert seen.value("famiglia.command.refused", game="", code="unknown_match") == 1
    assert seen.value("famiglia.command.hot_matches") == 1
    assert seen.value("famiglia.command.hot_bytes") == app.matches.held_bytes > 0


def test_a_command_that_lost_the_race_to_another_replica_is_counted_decided_again() -> None:
    store = InMemoryEventStore()
    with recorded() as seen:
        first, second = (bootstrap(store=store, settings=SETTINGS) for _ in range(2))
        created = first.create_match(GAME, 4, seed=3)
        viewer, command, _ = _pending_move(first, created.match_id, created.seat_tokens)
        second.matches.get(created.match_id)  # folded there too, before the move
        first.submit(created.match_id, viewer, "c-1", command)
        with pytest.raises(FailedPrecondition):  # the same seat again: its turn is over, on the new state
            second.submit(created.match_id, second.viewer(created.match_id, created.seat_tokens[viewer.seat]),
                          "c-2", command)
    assert seen.value("famiglia.command.redecided", game=GAME, reason="conflict") == 1


def test_a_seat_left_to_the_bots_is_counted_by_why() -> None:
    with recorded() as seen:
        app = bootstrap(store=InMemoryEventStore(), settings=SETTINGS)
        created = app.create_match(GAME, 4, seed=3)
        app.leave_match(created.match_id, app.viewer(created.match_id, created.seat_tokens[1]))
    assert seen.value("famiglia.command.seats_to_bots", game=GAME, reason="left") == 1


class _Call:
    """A served call's context, as the servicer reads it (its bearer token) and refuses it."""

    def __init__(self, token: str = "") -> None:
        self.metadata = (("authorization", f"Bearer {token}"),) if token else ()

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self.metadata

    def abort_with_status(self, status: object) -> None:
        raise _Refused(status)


class _Refused(Exception):
    pass


def test_a_submit_commands_refused_as_a_whole_is_counted_once_by_its_code() -> None:
    """SubmitCommands counted its entries' refusals only: a call refused whole (no such match,
    no commands, a bad ask_next token, an ask-only call made stale) was in no command metric."""
    with recorded() as seen:
        app = bootstrap(store=InMemoryEventStore(), settings=SETTINGS)
        created = app.create_match(GAME, 4, seed=3)
        viewer, command, _ = _pending_move(app, created.match_id, created.seat_tokens)
        token = created.seat_tokens[viewer.seat]
        entry = ChainedCommand(token, "c-1", _TYPE_URL + command.DESCRIPTOR.full_name, command.SerializeToString())
        with pytest.raises(InvalidArgument, match="no commands"):
            app.submit_chain(created.match_id, [])
        with pytest.raises(InvalidArgument, match="at most"):
            app.submit_chain(created.match_id, [entry] * (MAX_CHAIN + 1))
        with pytest.raises(NotFound):
            app.submit_chain("m-nowhere", [entry, entry])  # two commands, one refused call
        with pytest.raises(Unauthenticated):
            app.submit_chain(created.match_id, [entry], ask_next=[NextSeat("")])
        with pytest.raises(Aborted):
            app.submit_chain(created.match_id, [], created.version + 5, ask_next=[NextSeat(token)])
        assert app.submit_chain(created.match_id, [ChainedCommand("", "c-2", entry.type_url, entry.value)]
                                ).refusal.code == "no_token"  # an entry's: counted once, with its game
    assert seen.value("famiglia.command.refused", game="", code="no_commands") == 1
    assert seen.value("famiglia.command.refused", game="", code="too_many_commands") == 1
    assert seen.value("famiglia.command.refused", game="", code="unknown_match") == 1
    assert seen.value("famiglia.command.refused", game=GAME, code="no_token") == 2  # ask_next's, the entry's
    assert seen.value("famiglia.command.refused", game=GAME, code="stale_version") == 1
    assert seen.value("famiglia.command.accepted", game=GAME) is None


def test_a_call_the_servicer_refuses_before_the_app_is_counted_too() -> None:
    """A missing command or a seat token that does not hold, refused over gRPC before the app
    looked for the match: counted as the app's own refusals are (`game` "")."""
    from famiglia.v1 import game_service_pb2 as pb
    from services.command.entrypoints.grpc_server import GameServicer

    with recorded() as seen:
        app = bootstrap(store=InMemoryEventStore(), settings=SETTINGS)
        servicer = GameServicer(app)
        created = app.create_match(GAME, 4, seed=3)
        token = created.seat_tokens[0]
        with pytest.raises(_Refused):
            servicer.SubmitCommand(pb.SubmitCommandRequest(match_id=created.match_id, command_id="c-1"), _Call(token))
        with pytest.raises(_Refused):
            servicer.SubmitCommand(pb.SubmitCommandRequest(match_id=created.match_id, command_id="c-1"), _Call())
        with pytest.raises(_Refused):
            servicer.SubmitCommands(pb.SubmitCommandsRequest(match_id=created.match_id, commands=[
                pb.SeatCommand(seat_token=token, command_id="c-1")]), _Call())
    assert seen.value("famiglia.command.refused", game="", code="no_command") == 2
    assert seen.value("famiglia.command.refused", game="", code="no_token") == 1
