"""The command service's metrics, recorded by real commands (real bootstrap, in-memory store)."""

from __future__ import annotations

import pytest

from famiglia.config import Settings
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.grpcutil.errors import FailedPrecondition, NotFound
from services.command.app import CommandApp
from services.command.bootstrap import bootstrap
from tests.support.metrics import recorded

SETTINGS = Settings(secret="unit-test-secret")
GAME = "goodcritters"


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
