"""A match whose players left mid-way (`seat_left`, `seat_returned`), as replay reads it: the
seat changes are the server's public events and no game's, so folds pass over them,
verification re-runs the commands around them and checks each against the rules it is written
by, an import takes a well-formed match and refuses a malformed one, and the replay service
shows them as they are (a seat left for good reads the running match as a spectator)."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence

import pytest

from famiglia.auth import TokenSigner
from famiglia.config import Settings
from famiglia.engine import MatchConfig, Rng, fold
from famiglia.eventstore.envelopes import (
    SEAT_CHANGES,
    SEAT_LEFT,
    SEAT_RETURNED,
    game_envelopes,
    match_created_envelope,
    seat_change_envelope,
)
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.replay.access import Scope
from famiglia.replay.admission import Refused, stored_envelopes
from famiglia.replay.export import build_export, dump, recorded_commands
from famiglia.replay.sources import MemorySource
from famiglia.replay.timeline import MatchTimeline
from famiglia.replay.verify import verify_envelopes, verify_export
from famiglia.testing.random_play import choose_actor
from famiglia.v1 import envelope_pb2
from famiglia.v1.envelope_pb2 import EventEnvelope, SeatLeft, SeatReturned
from services.replay.bootstrap import ReplaySettings, bootstrap

from .games import copy, engine, game_ids, registry, toy_options

SECRET = "replay-seat-changes"
SIGNER = TokenSigner(SECRET)
START_MS = 1_700_000_000_000
Change = SeatLeft | SeatReturned


def played(game_id: str, changes: Mapping[int, Sequence[Change]], *, bots: Sequence[int] = (),
           stop_after: int | None = None, seed: int = 3) -> list[EventEnvelope]:
    """A random match stored as the command service stores it, with `changes[k]` written before
    its k-th command (from 0), as LeaveMatch / ReturnToMatch would; `stop_after` commands: live."""
    eng = engine(game_id)
    seats, match_id = eng.info.min_players, f"m-{game_id}"
    config = MatchConfig(seats=seats, options=toy_options(game_id))
    created = envelope_pb2.MatchCreated(game_id=game_id, seats=seats, seed=seed, options=config.options)
    for seat in range(seats):
        created.seat_info.add(seat=seat, player_id=f"p{seat}", bot=seat in bots, policy="random" if seat in bots else "")
    out = [match_created_envelope(match_id, created, now_ms=START_MS)]
    setup = eng.setup(config, seed)
    out += game_envelopes(eng, match_id, 1, setup, seat=-1, now_ms=START_MS)
    state, chooser, k = fold(eng, setup), random.Random(seed), 0
    while eng.result(state) is None and (stop_after is None or k < stop_after):
        ms = START_MS + (k + 1) * 1000
        for change in changes.get(k, ()):
            out.append(seat_change_envelope(match_id, len(out), game_id, change, command_id=f"seat:{len(out)}",
                                            now_ms=ms))
        seat, command = choose_actor(eng, state, chooser)  # type: ignore[misc]
        events = eng.decide(state, seat, command, Rng.derive(seed, len(out)))
        out += game_envelopes(eng, match_id, len(out), events, command_id=f"c{k}", seat=seat, command=command,
                              now_ms=ms)
        for event in events:
            state = eng.evolve(state, event)
        k += 1
    return out


AWAY_AND_BACK = {1: [SeatLeft(seat=1, policy="heuristic", reason="timeouts")], 3: [SeatReturned(seat=1)],
                 4: [SeatLeft(seat=1, policy="heuristic", reason="timeouts")],
                 5: [SeatLeft(seat=1, policy="heuristic", reason="left"), SeatLeft(seat=0, reason="left")]}
"""Seat 1 away by its clock, back, away again, then gone for good; seat 0 leaves too."""


@pytest.mark.parametrize("game_id", game_ids())
def test_a_match_with_seat_changes_folds_verifies_exports_and_imports(game_id: str) -> None:
    envelopes = played(game_id, AWAY_AND_BACK)
    changes = [e for e in envelopes if e.type in SEAT_CHANGES]
    assert len(changes) == 5
    timeline = MatchTimeline(registry(), envelopes, every=4)
    assert timeline.away == {0: "left", 1: "left"} and timeline.finished
    for env in changes:  # no game event: the state after it is the state before it
        assert timeline.state_at(env.seq) == timeline.state_at(env.seq - 1)
    report = verify_envelopes(registry(), envelopes)
    assert report.ok, report.describe()
    assert report.events_checked == len(envelopes)
    assert report.commands_checked == sum(1 for e in envelopes if e.command)
    export = build_export(registry(), envelopes)
    assert all(c.last_seq < changes[0].seq or c.first_seq > changes[0].seq for c in export.commands)
    assert verify_export(registry(), export).ok
    stored = stored_envelopes(registry(), export, "imported")
    assert [e.type for e in stored] == [e.type for e in envelopes]
    assert [e.payload for e in stored if e.type in SEAT_CHANGES] == [e.payload for e in changes]


def test_a_seat_left_written_with_a_clocks_command_is_not_that_commands() -> None:
    """The command service may write a `timeouts` seat_left in the clock default's own append,
    under its command id: the export's command list and the re-run end the command before it."""
    game_id = game_ids()[0]
    envelopes = played(game_id, {})
    clock = next(e for e in envelopes if e.command and e.seq > 3)
    end = clock.seq
    while end < len(envelopes) and not envelopes[end].command and envelopes[end].command_id == clock.command_id:
        end += 1  # (seq `end` is the command's last event)
    left = seat_change_envelope(clock.match_id, end, game_id, SeatLeft(seat=clock.seat, policy="random",
                                                                         reason="timeouts"),
                                command_id=clock.command_id, now_ms=START_MS)
    # Its place would shift every later seq (and the draws they seed): the match is cut there.
    tampered = [*copy(envelopes[:end]), left]
    listed = recorded_commands(tampered)
    assert listed[-1].command_id == clock.command_id and listed[-1].last_seq == end
    report = verify_envelopes(registry(), tampered)
    assert report.ok, report.describe()


def _refused(envelopes: list[EventEnvelope], seq: int, words: str) -> None:
    report = verify_envelopes(registry(), envelopes)
    assert not report.ok and report.divergence.reason == "format" and report.divergence.seq == seq, report.describe()
    assert words in report.divergence.detail
    with pytest.raises(Refused) as refused:
        stored_envelopes(registry(), build_export(registry(), envelopes), "imported")
    assert refused.value.code == "bad_export" and words in refused.value.message


def _first_change(envelopes: list[EventEnvelope]) -> EventEnvelope:
    return next(e for e in envelopes if e.type in SEAT_CHANGES)


def _seat_beyond(envelopes: list[EventEnvelope]) -> None:
    env = _first_change(envelopes)
    seats = envelope_pb2.MatchCreated.FromString(envelopes[0].payload).seats
    env.payload, env.seat = SeatLeft(seat=seats, reason="left").SerializeToString(), seats


def _reason(envelopes: list[EventEnvelope]) -> None:
    _first_change(envelopes).payload = SeatLeft(seat=1, reason="bored").SerializeToString()


def _other_seat(envelopes: list[EventEnvelope]) -> None:
    _first_change(envelopes).seat = 0


def _with_command(envelopes: list[EventEnvelope]) -> None:
    _first_change(envelopes).command = b"\x08\x01"


def _secret(envelopes: list[EventEnvelope]) -> None:
    _first_change(envelopes).visibility.kind = envelope_pb2.VISIBILITY_SERVER


MALFORMED: dict[str, tuple[Mapping[int, Sequence[Change]], Callable[[list[EventEnvelope]], None] | None, str]] = {
    "seat off the table": ({1: [SeatLeft(seat=1, reason="left")]}, _seat_beyond, "-seat table"),
    "unknown reason": ({1: [SeatLeft(seat=1, reason="left")]}, _reason, "reason"),
    "another seat's": ({1: [SeatLeft(seat=1, reason="left")]}, _other_seat, "recorded as seat 0's"),
    "with a command": ({1: [SeatLeft(seat=1, reason="left")]}, _with_command, "no command"),
    "not public": ({1: [SeatLeft(seat=1, reason="left")]}, _secret, "public"),
    "returned, never away": ({1: [SeatReturned(seat=1)]}, None, "is not away"),
    "returned after leaving for good": ({1: [SeatLeft(seat=1, reason="left")], 2: [SeatReturned(seat=1)]}, None,
                                        "was left for good"),
    "away twice": ({1: [SeatLeft(seat=1, reason="timeouts")], 2: [SeatLeft(seat=1, reason="timeouts")]}, None,
                   "away already"),
    "timeouts after leaving": ({1: [SeatLeft(seat=1, reason="left")], 2: [SeatLeft(seat=1, reason="timeouts")]},
                               None, "away already"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_seat_change_does_not_verify_nor_import(case: str) -> None:
    changes, tamper, words = MALFORMED[case]
    envelopes = played(game_ids()[0], changes)
    if tamper is not None:
        tamper(envelopes)
    bad = [e for e in envelopes if e.type in SEAT_CHANGES][-1] if tamper is None else _first_change(envelopes)
    _refused(envelopes, bad.seq, words)


def test_a_bot_seat_has_no_player_to_leave() -> None:
    envelopes = played(game_ids()[0], {1: [SeatLeft(seat=1, reason="left")]}, bots=[1])
    _refused(envelopes, _first_change(envelopes).seq, "created as a bot's")


def test_a_seat_change_after_the_matchs_result_is_refused() -> None:
    envelopes = played(game_ids()[0], {})
    created = envelopes[0]
    late = seat_change_envelope(created.match_id, len(envelopes), created.game_id, SeatLeft(seat=1, reason="left"),
                                command_id="late", now_ms=START_MS)
    _refused([*envelopes, late], late.seq, "follows the match's end")


# -- the replay service -----------------------------------------------------------------------
def _app(store: InMemoryEventStore):  # type: ignore[no-untyped-def]
    return bootstrap(store=store, cold=MemorySource(), registry=registry(), settings=Settings(secret=SECRET),
                     replay_settings=ReplaySettings())


def test_the_replay_service_shows_seat_changes_as_they_are_and_exports_them() -> None:
    game_id = game_ids()[0]
    envelopes = played(game_id, AWAY_AND_BACK)
    store = InMemoryEventStore()
    match_id = envelopes[0].match_id
    store.append(match_id, 0, envelopes)
    app = _app(store)
    changes = [e for e in envelopes if e.type in SEAT_CHANGES]
    page = app.list_events(match_id, SIGNER.seat_token(match_id, 0), page_size=len(envelopes))
    listed = {info.envelope.seq: info for info in page.events}
    for env in changes:  # public: every asker sees it whole, with its seat
        assert listed[env.seq].type == env.type and not listed[env.seq].hidden and listed[env.seq].seat == env.seat
    steps = {s.envelope.seq: s for s in app.replay(None, match_id=match_id)}
    assert [steps[e.seq].envelope.type for e in changes] == [SEAT_LEFT, SEAT_RETURNED, SEAT_LEFT, SEAT_LEFT, SEAT_LEFT]
    assert steps[changes[0].seq].event is None
    assert steps[changes[0].seq].event_text == "seat 1's player let the clock run out too often: the bots play it " \
                                               "(heuristic)"
    assert steps[changes[1].seq].event_text == "seat 1's player took the seat back from the bots"
    answer = app.state_at(changes[0].event_id, None)
    assert answer.envelope.seq == changes[0].seq
    assert answer.view == app.state_at(envelopes[changes[0].seq - 2].event_id, None).view
    over = app.state_at(envelopes[-1].event_id, SIGNER.seat_token(match_id, 1)).access  # left for good, but over
    assert over.scope is Scope.SEAT and over.viewer == 1
    data = dump(app.export(match_id))
    assert app.verify_match(match_id).ok
    imported, version, report = app.import_file(data, token=SIGNER.operator_token("ops"), new_match_id="m-again")
    assert report.ok and version == len(envelopes)
    again = store.read(imported)
    assert [(e.seq, e.type, e.payload) for e in again if e.type in SEAT_CHANGES] == \
        [(e.seq, e.type, e.payload) for e in changes]


def test_a_seat_left_for_good_reads_the_running_match_as_a_spectator() -> None:
    """Its hidden cards are the bot's now; a seat away by its clock still reads its own view (it
    may come back), and once the match is over the token reads as any seat's."""
    game_id = game_ids()[0]
    envelopes = played(game_id, {1: [SeatLeft(seat=0, policy="random", reason="timeouts")],
                                 2: [SeatLeft(seat=1, policy="random", reason="left")]}, stop_after=4)
    store = InMemoryEventStore()
    match_id = envelopes[0].match_id
    store.append(match_id, 0, envelopes)
    app = _app(store)
    last = envelopes[-1].event_id
    assert app.state_at(last, SIGNER.seat_token(match_id, 1)).access.scope is Scope.SPECTATOR
    away = app.state_at(last, SIGNER.seat_token(match_id, 0)).access
    assert away.scope is Scope.SEAT and away.viewer == 0


def test_the_randomized_suites_audit_flags_each_seat_change_out_of_its_place() -> None:
    """`tests/support/seat_changes.py`, which the randomized replay, projection, race and bots
    suites lean on: a match played through the command service with seats changing hands has
    nothing to report; one whose seat changes are out of place has each reported."""
    from famiglia.eventstore.memory_store import InMemoryEventStore
    from services.command.bootstrap import bootstrap as command_bootstrap
    from tests.support.seat_changes import play_with_seat_changes, seat_change_problems

    game_id = next(g for g in game_ids() if g != "replay_toy")
    commands = command_bootstrap(store=InMemoryEventStore(), registry=registry(), settings=Settings(secret=SECRET))
    good = play_with_seat_changes(commands, game_id, engine(game_id).info.min_players, seed=1)
    envelopes = commands.store.read(good.match_id)
    assert good.leaves + good.returns and any(e.type in SEAT_CHANGES for e in envelopes)
    assert seat_change_problems(registry(), envelopes) == []

    # seat 1 sent to the bots by no clock of its own, a person's command under a bots' id, and
    # after the end a second leave and a return of a seat left for good
    bad = played(game_id, AWAY_AND_BACK)
    bad.append(seat_change_envelope(bad[0].match_id, len(bad), game_id, SeatLeft(seat=0, reason="left"),
                                    command_id="leave", now_ms=START_MS))
    bad.append(seat_change_envelope(bad[0].match_id, len(bad), game_id, SeatReturned(seat=0),
                                    command_id="return:1", now_ms=START_MS))
    first = next(e for e in bad if e.command)  # a person's command, before any seat changed hands
    first.command_id = f"bot:{first.match_id}:{first.seq - 1}:{first.seat}"
    problems = seat_change_problems(registry(), bad)
    assert sum("not right after its seat's clock default" in p for p in problems) == 2, problems
    assert sum("after the match's end" in p for p in problems) == 2, problems
    assert any("a second seat_left(left) of seat 0" in p for p in problems), problems
    assert any("seat_returned of a seat left" in p for p in problems), problems
    assert any(f"seq {first.seq} " in p and "for a seat its person plays" in p for p in problems), problems
