"""Guards of replay, verification, sources, admission and the replay CLI that a mutation of the
code once changed without any other test noticing."""

from __future__ import annotations

import pytest

from famiglia.auth import TokenSigner
from famiglia.cli import replay as cli
from famiglia.config import Settings
from famiglia.engine import MatchConfig
from famiglia.eventstore.envelopes import game_envelopes, match_created_envelope
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.grpcutil.errors import AppError, InvalidArgument, PermissionDenied
from famiglia.replay.export import BadExport, build_export, dump, load
from famiglia.replay.sources import EventIndex, LayeredSource, MemorySource, StoreSource
from famiglia.replay.timeline import MatchTimeline
from famiglia.replay.toy import toy_engine
from famiglia.replay.verify import verify_envelopes, verify_export
from famiglia.v1 import envelope_pb2
from famiglia.v1 import replay_service_pb2 as pb
from services.replay.bootstrap import ReplaySettings, bootstrap
from tests.unit.replay.games import copy, recorded, registry
from tests.unit.replay.test_forged_and_odd_records import _InProcessClient

SECRET = "review-guards-secret"
SIGNER = TokenSigner(SECRET)
TOY = "replay_toy"


def _app(store: InMemoryEventStore):
    return bootstrap(store=store, cold=MemorySource(), registry=registry(), settings=Settings(secret=SECRET),
                     replay_settings=ReplaySettings())


def _stored(seed: int = 3):
    envelopes = copy(recorded(TOY, seed))
    store = InMemoryEventStore()
    store.append(envelopes[0].match_id, 0, envelopes)
    return store, envelopes


def _code(call) -> tuple[type, str]:
    with pytest.raises(AppError) as caught:
        call()
    return type(caught.value), caught.value.code


# -- seat tokens ------------------------------------------------------------------------------
def test_a_seat_token_for_the_seat_just_past_the_table_is_refused() -> None:
    """Fails on a change the suite once missed (`0 <= seat <= seats`)."""
    store, envelopes = _stored()
    app = _app(store)
    seats = app.timeline(envelopes[0].match_id).seats
    token = SIGNER.seat_token(envelopes[0].match_id, seats)
    assert _code(lambda: app.state_at(envelopes[5].event_id, token)) == (PermissionDenied, "no_such_seat")


def test_a_seat_token_for_a_negative_seat_is_refused() -> None:
    """Fails on a change the suite once missed (lower bound dropped)."""
    store, envelopes = _stored()
    app = _app(store)
    token = SIGNER.seat_token(envelopes[0].match_id, -1)
    assert _code(lambda: app.state_at(envelopes[5].event_id, token)) == (PermissionDenied, "no_such_seat")
    assert _code(lambda: list(app.replay(token, match_id=envelopes[0].match_id))) == (PermissionDenied,
                                                                                     "no_such_seat")


# -- locating and ranges ----------------------------------------------------------------------------
def test_a_match_hint_that_does_not_hold_the_event_never_breaks_the_call() -> None:
    """Fails on a change the suite once missed (the hint's timeline returned with seq None -> TypeError, INTERNAL)."""
    store = InMemoryEventStore()
    a, b = copy(recorded(TOY, 3)), copy(recorded(TOY, 11))
    for envelopes in (a, b):
        store.append(envelopes[0].match_id, 0, envelopes)
    app = _app(store)
    try:
        answer = app.state_at(b[5].event_id, None, match_id=a[0].match_id)
    except AppError:
        return  # a refusal with a stable code is fine too
    assert answer.timeline.match_id == b[0].match_id and answer.envelope.seq == 6


def test_stream_replay_refuses_a_seq_below_one_and_a_negative_speed() -> None:
    """Fails on a change the suite once missed (first < 1 unchecked -> IndexError), and (negative speed unchecked)."""
    store, envelopes = _stored()
    app = _app(store)
    match_id = envelopes[0].match_id
    assert _code(lambda: list(app.replay(None, match_id=match_id, from_seq=-3))) == (InvalidArgument, "bad_range")
    assert _code(lambda: list(app.replay(None, match_id=match_id, speed=-1.0, recorded_pace=True))) == (
        InvalidArgument, "bad_range")


def test_list_match_events_refuses_page_tokens_below_one_and_negative_sizes() -> None:
    """Fails on a change the suite once missed (start < 1 unchecked -> IndexError), and (negative page size unchecked)."""
    store, envelopes = _stored()
    app = _app(store)
    match_id = envelopes[0].match_id
    for token in ("0", "-4"):
        assert _code(lambda t=token: app.list_events(match_id, None, page_token=t)) == (InvalidArgument,
                                                                                        "bad_page_token")
    assert _code(lambda: app.list_events(match_id, None, page_size=-1)) == (InvalidArgument, "bad_page_size")


# -- unattributed events: a command whose hidden event comes first --------------------------------------
def _hidden_first_match():
    """A toy match (running) whose last command made a private card_taken, then a public card_drawn."""
    engine = toy_engine()
    match_id = "m-hidden-first"
    created = envelope_pb2.MatchCreated(game_id=engine.info.game_id, seats=2, seed=7)
    out = [match_created_envelope(match_id, created, now_ms=1_700_000_000_000)]
    setup = engine.setup(MatchConfig(seats=2, options={}), 7)
    out += game_envelopes(engine, match_id, 1, setup, seat=-1, now_ms=1_700_000_000_000)
    deck = list(setup[0].deck_shuffled.order)
    events = [engine.Event(card_taken={"seat": 0, "card": deck[6]}), engine.Event(card_drawn={"seat": 0})]
    command = engine.Command(draw={})
    out += game_envelopes(engine, match_id, len(out), events, command_id="c1", seat=0, command=command,
                          now_ms=1_700_000_001_000)
    return out


def test_a_public_event_after_its_commands_hidden_one_is_not_attributed() -> None:
    """Fails on a change the suite once missed (no backward walk in _PartlyHidden): the public card_drawn would name seat 0 and
    command c1 to a spectator although the same command's card_taken is hidden from it."""
    envelopes = _hidden_first_match()
    store = InMemoryEventStore()
    store.append(envelopes[0].match_id, 0, envelopes)
    app = _app(store)
    match_id = envelopes[0].match_id
    infos = app.list_events(match_id, None).events
    drawn = next(i for i in infos if i.type == "card_drawn")
    assert (drawn.seat, drawn.command_id) == (-1, "")
    assert next(i for i in infos if i.envelope.type == "card_taken").hidden
    step = next(s for s in app.replay(None, match_id=match_id) if s.envelope.type == "card_drawn")
    assert step.unattributed
    mine = next(i for i in app.list_events(match_id, SIGNER.seat_token(match_id, 0)).events
                if i.type == "card_drawn")
    assert (mine.seat, mine.command_id) == (0, "c1")  # seat 0 sees both: attributed


# -- timeline and sources ---------------------------------------------------------------------------
def test_a_timeline_never_folds_another_matchs_envelope() -> None:
    """Fails on a change the suite once missed (match id check dropped in MatchTimeline.extend)."""
    envelopes = copy(recorded(TOY))
    envelopes[6].match_id = "another-match"
    with pytest.raises(ValueError, match="names match"):
        MatchTimeline(registry(), envelopes)


class _Partial:
    """A hot source whose stream no longer starts at the first event (trimmed in part)."""

    def __init__(self, envelopes) -> None:
        self.envelopes = envelopes

    def read(self, match_id, after=0):
        return [e for e in self.envelopes if e.seq > max(after, 3)]

    def find(self, event_id):
        return None


def test_a_hot_stream_that_does_not_start_where_asked_is_read_whole_from_the_archive() -> None:
    """Fails on a change the suite once missed (a partial hot stream accepted: stitched or gapped)."""
    envelopes = copy(recorded(TOY))
    cold = MemorySource()
    cold.add(envelopes)
    layered = LayeredSource(_Partial(envelopes), cold)
    assert layered.read(envelopes[0].match_id) == envelopes
    assert layered.read(envelopes[0].match_id, after=1) == envelopes[1:]


class _Counting(MemorySource):
    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def read(self, match_id, after=0):
        self.reads += 1
        return super().read(match_id, after)


def test_catching_up_a_running_match_with_nothing_new_never_reads_the_archive() -> None:
    """Fails on a change the suite once missed (`version < after`: the archive (SQL) queried on every question about a caught-up match)."""
    envelopes = copy(recorded(TOY))[:20]
    store = InMemoryEventStore()
    store.append(envelopes[0].match_id, 0, envelopes)
    cold = _Counting()
    layered = LayeredSource(StoreSource(store), cold)
    assert layered.read(envelopes[0].match_id, after=20) == []
    assert cold.reads == 0


def test_the_event_index_keeps_exactly_its_capacity() -> None:
    """Fails on a change the suite once missed (`>=`: one entry fewer than the capacity kept)."""
    index = EventIndex(capacity=3)
    envelopes = copy(recorded(TOY))[:5]
    index.note(envelopes)
    assert [index.get(e.event_id) is not None for e in envelopes] == [False, False, True, True, True]


# -- verification ---------------------------------------------------------------------------------------
def test_an_envelope_claiming_another_payload_type_does_not_verify() -> None:
    """Fails on a change the suite once missed (payload_type not compared)."""
    envelopes = copy(recorded(TOY))
    target = envelopes[len(envelopes) // 2]
    target.payload_type = "famiglia.elsewhere.v1.Event"
    report = verify_envelopes(registry(), envelopes)
    assert not report.ok and report.divergence.seq == target.seq and report.divergence.reason == "type"


def test_envelopes_of_two_matches_do_not_verify_as_one() -> None:
    """Fails on a change the suite once missed (match id of each envelope not compared)."""
    envelopes = copy(recorded(TOY))
    envelopes[10].match_id = "another-match"
    report = verify_envelopes(registry(), envelopes)
    assert not report.ok and report.divergence.seq == 11 and report.divergence.reason == "format"


def test_a_command_list_that_disagrees_with_the_recorded_command_bytes_is_a_format_error() -> None:
    """Fails on a change the suite once missed (the file's command list compared without its command bytes)."""
    export = build_export(registry(), copy(recorded(TOY)))
    eng = toy_engine()
    target = export.commands[3]
    other = eng.Command(roll={}) if eng.Command.FromString(target.command).WhichOneof("kind") != "roll" \
        else eng.Command(draw={})
    target.command = other.SerializeToString()
    report = verify_export(registry(), export)
    assert not report.ok and report.divergence.reason == "format" and report.divergence.seq == target.first_seq


def test_a_header_whose_setup_record_or_options_disagree_is_a_format_error() -> None:
    """Fails on a change the suite once missed (`export.setup` not compared), and (options not compared)."""
    export = build_export(registry(), copy(recorded(TOY)))
    export.setup.seed += 1
    assert verify_export(registry(), export).divergence.reason == "format"
    export = build_export(registry(), copy(recorded(TOY)))
    export.options["turns"] = "99"
    report = verify_export(registry(), export)
    assert not report.ok and report.divergence.reason == "format" and report.divergence.seq == 1


def test_a_file_without_a_format_version_is_no_export() -> None:
    """Fails on a change the suite once missed (format_version 0 accepted)."""
    export = build_export(registry(), copy(recorded(TOY)))
    export.format_version = 0
    for binary in (False, True):
        with pytest.raises(BadExport):
            load(dump(export, binary=binary))


# -- admission --------------------------------------------------------------------------------------------
def test_an_acting_seat_equal_to_the_seat_count_is_refused_at_import() -> None:
    """Fails on a change the suite once missed (`-1 <= seat <= seats`)."""
    export = build_export(registry(), copy(recorded(TOY, 5)))
    export.events[8].seat = export.seats
    app = _app(InMemoryEventStore())
    code = _code(lambda: app.import_file(dump(export, binary=True), token=SIGNER.operator_token(),
                                         new_match_id="m-seat", allow_unverified=True))
    assert code == (InvalidArgument, "bad_export")


# -- CLI -----------------------------------------------------------------------------------------------------
class _Quiet:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def print(self, *items, **_k) -> None:
        self.lines.extend(i if isinstance(i, str) else str(getattr(i, "title", i)) for i in items)


class _Importer:
    def __init__(self, ok: bool) -> None:
        self.ok = ok

    def import_file(self, data, *, token, new_match_id="", allow_unverified=False):
        return pb.ImportMatchResponse(match_id="m-x", version=3, verification=pb.VerifyMatchResponse(ok=self.ok))


def test_cli_import_exits_one_when_stored_unverified(tmp_path) -> None:
    """Fails on a change the suite once missed (exit 0 whatever the verification said)."""
    path = tmp_path / "m.json"
    path.write_bytes(b"{}")
    assert cli.import_file(_Importer(True), path, token="t", out=_Quiet()) == 0
    assert cli.import_file(_Importer(False), path, token="t", allow_unverified=True, out=_Quiet()) == 1


def test_cli_stepping_stays_on_the_last_event() -> None:
    """Fails on a change the suite once missed (no last-event guard: `n` at the end -> IndexError)."""
    store, envelopes = _stored()
    app = _app(store)
    keys = iter(["n", "n", "q"])
    out = _Quiet()
    assert cli.step_through(_InProcessClient(app), envelopes[-1].event_id, ask=lambda _: next(keys), out=out) == 0
    assert out.lines.count("(last event)") == 2


class _Failover:
    """A hot store whose last writes a failover may take back, or which may be out of reach."""

    def __init__(self, envelopes) -> None:
        self.envelopes, self.away = list(envelopes), False

    def read(self, match_id, after=0):
        return [e for e in self.envelopes if e.seq > after and e.match_id == match_id]

    def find(self, event_id):
        return None

    def version(self, match_id):
        if self.away:
            import redis

            raise redis.ConnectionError("Connection refused")
        return len(self.read(match_id))


def test_a_finished_match_whose_ending_the_store_lost_is_no_longer_shown_whole() -> None:
    """The full view is granted once a match is over, decided on the cached timeline. A store
    that lost the ending (a failover) plays the match on from the same deck, but the cache still
    said "over" and showed anyone the whole state, deck order included. Now the store's version
    is asked first; while the store is away, the match is shown as last read, as before."""
    from famiglia.replay.sources import LayeredSource
    from services.replay.app import ReplayApp

    envelopes = copy(recorded(TOY))
    hot = _Failover(envelopes)
    app = ReplayApp(source=LayeredSource(hot, MemorySource()), registry=registry(), signer=SIGNER)
    cut, match_id = envelopes[len(envelopes) // 2], envelopes[0].match_id
    assert app.state_at(cut.event_id, None, full=True, match_id=match_id).access.scope.name == "FULL"
    hot.away = True
    assert app.state_at(cut.event_id, None, full=True, match_id=match_id).finished  # served as last read
    hot.away = False
    hot.envelopes = envelopes[:-4]  # the ending lost: the match runs again from there
    assert _code(lambda: app.state_at(cut.event_id, None, full=True, match_id=match_id)) == (PermissionDenied,
                                                                                          "match_running")
    assert app.timeline(match_id).last_seq == len(envelopes) - 4
