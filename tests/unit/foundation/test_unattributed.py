"""Which events a viewer sees without their acting seat (famiglia.eventstore.envelopes.unattributed)."""

from __future__ import annotations

from famiglia.eventstore.envelopes import unattributed
from famiglia.v1.envelope_pb2 import EventEnvelope


def _env(seq: int, seat: int, command_id: str) -> EventEnvelope:
    return EventEnvelope(seq=seq, seat=seat, command_id=command_id)


def test_a_command_with_a_hidden_event_shows_its_other_events_unattributed() -> None:
    envelopes = [
        _env(1, -1, ""),      # setup: no command
        _env(2, 0, "a"),      # seat 0's hidden answer ...
        _env(3, 0, "a"),      # ... and the window closing, public
        _env(4, 1, "a"),      # seat 1's own command "a": another command
        _env(5, 1, "b"),
        _env(6, 1, "b"),
    ]
    hidden = [False, True, False, False, False, True]
    assert unattributed(envelopes, hidden) == {2, 4}
    assert unattributed(envelopes, [False] * 6) == set()


def test_events_without_a_command_are_each_their_own() -> None:
    envelopes = [_env(1, -1, ""), _env(2, -1, "")]
    assert unattributed(envelopes, [True, False]) == set()


def test_a_read_cut_inside_a_command_keeps_that_command_for_the_next_read() -> None:
    from services.command.app import _whole_commands

    cut = [_env(1, -1, ""), _env(2, 0, "a"), _env(3, 1, "b"), _env(4, 1, "b")]
    assert [e.seq for e in _whole_commands(cut)] == [1, 2]
    assert [e.seq for e in _whole_commands(cut[:2] + [_env(3, -1, "")])] == [1, 2, 3]  # no command: whole
    assert [e.seq for e in _whole_commands(cut[2:])] == [3, 4]  # one command only: all of it
