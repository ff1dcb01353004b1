"""An exported match verifies; a tampered export is caught at the first altered event."""

from __future__ import annotations

import pytest

from famiglia.eventstore.envelopes import visibility_proto
from famiglia.replay.export import FORMAT_VERSION, BadExport, build_export, dump, load, recorded_commands
from famiglia.replay.verify import verify_envelopes, verify_export
from famiglia.v1 import envelope_pb2

from .games import copy, engine, game_ids, recorded, registry


def _export(game_id: str):
    return build_export(registry(), copy(recorded(game_id)), exported_at_ms=1_700_000_000_000)


def _first_command_event(export, after: int = 0) -> envelope_pb2.EventEnvelope:
    return next(e for e in export.events if e.command and e.seq > after)


@pytest.mark.parametrize("game_id", game_ids())
def test_an_exported_match_verifies_from_json_and_from_binary(game_id: str) -> None:
    export = _export(game_id)
    for binary in (False, True):
        report = verify_export(registry(), load(dump(export, binary=binary)))
        assert report.ok, report.describe()
        assert report.events_checked == len(export.events)
        assert report.commands_checked == len(export.commands) > 0


@pytest.mark.parametrize("game_id", game_ids())
def test_the_export_holds_setup_seed_options_commands_and_every_envelope(game_id: str) -> None:
    envelopes = recorded(game_id)
    export = load(dump(_export(game_id)))
    assert export.format_version == FORMAT_VERSION
    assert export.game_id == game_id and export.seats == engine(game_id).info.min_players
    assert export.seed == export.setup.seed == 3
    assert list(export.events) == list(envelopes)
    assert [c.first_seq for c in export.commands] == [e.seq for e in envelopes if e.command]
    assert all(c.text and c.command_type for c in export.commands)
    assert export.setup_last_seq == min(e.seq for e in envelopes if e.command_id) - 1


@pytest.mark.parametrize("game_id", game_ids())
def test_a_tampered_payload_is_caught_at_that_event(game_id: str) -> None:
    export = _export(game_id)
    target = export.events[len(export.events) // 2]
    # Another event's payload of the same kind where there is one (a plausible forgery), else extra bytes.
    forged = [e.payload for e in export.events if e.type == target.type and e.payload != target.payload]
    target.payload = forged[0] if forged else target.payload + b"\x08\x01"
    report = verify_export(registry(), load(dump(export)))
    assert not report.ok
    assert report.divergence.seq == target.seq
    assert report.divergence.reason in ("payload", "type")
    assert report.divergence.expected and report.divergence.got
    assert f"seq {target.seq}" in report.describe()


@pytest.mark.parametrize("game_id", game_ids())
def test_a_tampered_setup_event_is_caught_before_any_command(game_id: str) -> None:
    export = _export(game_id)
    export.events[1].payload += b"\x08\x01"
    report = verify_export(registry(), export)
    assert not report.ok and report.divergence.seq == 2 and report.commands_checked == 0


def test_a_tampered_visibility_is_caught() -> None:
    export = _export("replay_toy")
    target = next(e for e in export.events if e.visibility.kind == envelope_pb2.VISIBILITY_PRIVATE)
    target.visibility.CopyFrom(envelope_pb2.Visibility(kind=envelope_pb2.VISIBILITY_PUBLIC))
    report = verify_export(registry(), export)
    assert report.divergence.seq == target.seq and report.divergence.reason == "visibility"


def test_a_tampered_command_is_caught_at_its_first_event() -> None:
    export = _export("replay_toy")
    eng = engine("replay_toy")
    rolls = [e for e in export.events if e.command and eng.info.command_type.FromString(e.command).HasField("roll")]
    target = rolls[len(rolls) // 2]
    # A draw instead of the recorded roll: both in the envelope and in the file's command list.
    target.command = eng.info.command_type(draw={}).SerializeToString()
    for cmd in export.commands:
        if cmd.first_seq == target.seq:
            cmd.command = target.command
    report = verify_export(registry(), export)
    assert not report.ok and report.divergence.seq == target.seq
    assert report.divergence.command == "draw"


def test_a_different_seed_breaks_the_setup() -> None:
    export = _export("replay_toy")
    created = envelope_pb2.MatchCreated.FromString(export.events[0].payload)
    created.seed += 1
    export.events[0].payload = created.SerializeToString()
    export.setup.seed = export.seed = created.seed
    report = verify_export(registry(), export)
    assert report.divergence.seq == 2 and report.divergence.reason == "payload"


def test_a_file_that_disagrees_with_itself_is_a_format_error() -> None:
    export = _export("replay_toy")
    export.seed += 1
    assert verify_export(registry(), export).divergence.reason == "format"
    export = _export("replay_toy")
    del export.commands[3]
    report = verify_export(registry(), export)
    assert report.divergence.reason == "format" and report.divergence.seq == _export("replay_toy").commands[3].first_seq



def test_a_command_list_or_setup_range_that_disagrees_with_the_events_is_a_format_error() -> None:
    """Every field the file states beside its events is checked against them (docs/replay.md,
    Verification step 1), not only some: a reader taking a command's events to end at its
    `last_seq`, or setup to end at `setup_last_seq`, reads what verification vouched for.
    (Before, a tampered `last_seq` or `setup_last_seq` verified OK.)"""
    honest = _export("replay_toy")
    k = next(i for i, c in enumerate(honest.commands) if c.last_seq > c.first_seq)
    export = _export("replay_toy")
    export.commands[k].last_seq -= 1
    report = verify_export(registry(), export)
    assert not report.ok and report.divergence.reason == "format"
    assert report.divergence.seq == honest.commands[k].first_seq
    for changed in (honest.setup_last_seq - 1, honest.setup_last_seq + 1):
        export = _export("replay_toy")
        export.setup_last_seq = changed
        report = verify_export(registry(), export)
        assert not report.ok and report.divergence.reason == "format" and report.divergence.seq == 1

def test_a_match_without_recorded_commands_cannot_be_verified() -> None:
    envelopes = copy(recorded("replay_toy"))
    first = next(e for e in envelopes if e.command)
    first.ClearField("command")
    report = verify_envelopes(registry(), envelopes)
    assert report.divergence.seq == first.seq and report.divergence.reason == "missing"


def test_a_missing_event_is_reported_where_the_engine_produces_one() -> None:
    envelopes = copy(recorded("replay_toy"))
    draw = next(e for e in envelopes if e.type == "card_drawn")  # followed by its private card_taken
    cut = [e for e in envelopes if e.seq <= draw.seq]
    report = verify_envelopes(registry(), cut)
    assert report.divergence.seq == draw.seq + 1 and report.divergence.reason == "missing"
    assert "card_taken" in report.divergence.got


def test_files_of_a_newer_format_or_no_export_at_all_are_refused() -> None:
    export = _export("replay_toy")
    export.format_version = FORMAT_VERSION + 1
    with pytest.raises(BadExport, match="newer"):
        load(dump(export))
    with pytest.raises(BadExport):
        load(b"{}")
    with pytest.raises(BadExport):
        load(b"\xff\xfe not protobuf")


def test_recorded_commands_group_each_commands_events() -> None:
    envelopes = recorded("replay_toy")
    commands = recorded_commands(envelopes)
    covered = [seq for c in commands for seq in range(c.first_seq, c.last_seq + 1)]
    assert covered == [e.seq for e in envelopes if e.command_id]
    assert all(visibility_proto(engine("replay_toy").visibility(
        engine("replay_toy").info.event_type.FromString(e.payload))) == e.visibility for e in envelopes[1:])
