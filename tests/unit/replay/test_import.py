"""ImportMatch: an operator action that stores only what every service can read, under fresh
event ids and attributed to no player or tournament; stored garbage reads as FAILED_PRECONDITION."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from famiglia.auth import TokenSigner
from famiglia.config import Settings
from famiglia.engine.registry import Registry
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.grpcutil.errors import AppError, FailedPrecondition, InvalidArgument, Unauthenticated
from famiglia.replay.export import build_export, dump
from famiglia.replay.sources import MemorySource
from famiglia.v1.envelope_pb2 import MatchCreated
from famiglia.v1.replay_service_pb2 import MatchExport
from services.replay.app import ReplayApp
from services.replay.bootstrap import ReplaySettings, bootstrap

from .games import copy, recorded, registry

SECRET = "replay-import-secret"
SIGNER = TokenSigner(SECRET)
TOY = "replay_toy"


def _app(store: InMemoryEventStore | None = None) -> ReplayApp:
    return bootstrap(store=store or InMemoryEventStore(), cold=MemorySource(), registry=registry(),
                     settings=Settings(secret=SECRET), replay_settings=ReplaySettings())


def _export(**created_fields: object) -> MatchExport:
    """A finished toy match as a file, its MatchCreated changed as given (header kept in step)."""
    envelopes = copy(recorded(TOY, 5))
    created = MatchCreated.FromString(envelopes[0].payload)
    for key, value in created_fields.items():
        if key == "seat_info":
            for seat, (player, name) in enumerate(value):  # type: ignore[arg-type]
                created.seat_info.add(seat=seat, player_id=player, display_name=name)
        elif key == "options":
            created.options.update(value)  # type: ignore[arg-type]
        else:
            setattr(created, key, value)
    envelopes[0].payload = created.SerializeToString(deterministic=True)
    return build_export(registry(), envelopes)


def _code(call: Callable[[], object]) -> tuple[str, str]:
    with pytest.raises(AppError) as caught:
        call()
    return type(caught.value).__name__, caught.value.code


# -- who may import -----------------------------------------------------------------------------
def test_import_is_an_operator_action() -> None:
    store = InMemoryEventStore()
    app = _app(store)
    data = dump(_export())
    match_id = _export().match_id
    other_signer = TokenSigner("another-deployment")
    refused = {
        "none": (None, ("Unauthenticated", "no_token")),
        "empty": ("", ("Unauthenticated", "no_token")),
        "garbage": ("x.é", ("Unauthenticated", "bad_token")),
        "forged": (other_signer.operator_token(), ("Unauthenticated", "bad_token")),
        "expired": (SIGNER.operator_token(ttl_s=60, now=1_000.0), ("Unauthenticated", "bad_token")),
        "seat": (SIGNER.seat_token(match_id, 0), ("PermissionDenied", "operator_only")),
        "player": (SIGNER.player_token("p1"), ("PermissionDenied", "operator_only")),
    }
    for label, (token, expected) in refused.items():
        assert _code(lambda t=token: app.import_file(data, token=t, new_match_id="m-x")) == expected, label
    assert store.read("m-x") == []
    assert app.import_file(data, token=SIGNER.operator_token("ops"), new_match_id="m-x")[0] == "m-x"


def test_operator_tokens_are_their_own_kind_and_expire() -> None:
    token = SIGNER.operator_token("ops", ttl_s=60, now=1_000.0)
    assert SIGNER.read_operator(token, now=1_059.0) == "ops"
    from famiglia.auth import InvalidToken
    from famiglia.auth.tokens import WrongKind

    with pytest.raises(InvalidToken, match="expired"):
        SIGNER.read_operator(token, now=1_060.0)
    with pytest.raises(WrongKind):
        SIGNER.read_seat(token)
    with pytest.raises(WrongKind):
        SIGNER.read_operator(SIGNER.seat_token("m1", 0))


# -- what is stored ---------------------------------------------------------------------------------
def test_imported_events_always_get_fresh_ids_even_when_the_file_repeats_one() -> None:
    store = InMemoryEventStore()
    app = _app(store)
    op = SIGNER.operator_token()
    export = _export()
    export.events[3].event_id = export.events[2].event_id  # a file holding one id twice
    data = dump(export)
    app.import_file(data, token=op, new_match_id="m-a")
    app.import_file(data, token=op, new_match_id="m-b")
    file_ids = {e.event_id for e in export.events}
    a, b = ({e.event_id for e in store.read(m)} for m in ("m-a", "m-b"))
    assert len(a) == len(b) == len(export.events)  # every stored id distinct
    assert not a & b and not a & file_ids and not b & file_ids
    assert [e.timestamp for e in store.read("m-a")] == [e.timestamp for e in export.events]


def test_an_imported_match_counts_for_no_player_and_no_tournament() -> None:
    store = InMemoryEventStore()
    app = _app(store)
    export = _export(seat_info=[("attacker", "Attacker"), ("victim", "Victim")], tournament_id="t-forged")
    _, _, report = app.import_file(dump(export), token=SIGNER.operator_token(), new_match_id="m-forged")
    assert report.ok
    stored = MatchCreated.FromString(store.read("m-forged")[0].payload)
    assert stored.tournament_id == ""
    assert [(i.seat, i.player_id, i.display_name) for i in stored.seat_info] == [(0, "", "Attacker"), (1, "", "Victim")]
    assert (stored.game_id, stored.seats, stored.seed) == (export.game_id, export.seats, export.seed)
    assert app.verify_match("m-forged").ok  # setup and commands untouched


def test_an_imported_match_is_the_rematch_of_no_match() -> None:
    """A file's `rematch_of` is a claim too (a match of the server that wrote it, or any id):
    kept, the import would be the rematch of whatever match holds that id here, in the read
    models' series. It is dropped, whatever it holds (a match id of this server, an id no column
    holds: too long, a NUL), and the match verifies as the file did."""
    store = InMemoryEventStore()
    app = _app(store)
    op = SIGNER.operator_token()
    original = "m-first"
    app.import_file(dump(_export()), token=op, new_match_id=original)
    for n, claim in enumerate((original, "x" * 300, "m\x00first")):
        export = _export(rematch_of=claim)
        assert export.setup.rematch_of == claim
        _, _, report = app.import_file(dump(export), token=op, new_match_id=f"m-claim{n}")
        assert report.ok
        assert MatchCreated.FromString(store.read(f"m-claim{n}")[0].payload).rematch_of == ""
        assert app.verify_match(f"m-claim{n}").ok


# -- what is refused, whatever allow_unverified says -----------------------------------------------------
def _garbage_payload(e: MatchExport) -> None:
    e.events[10].payload = b"\xff\xff\xff"


def _not_created(e: MatchExport) -> None:
    e.events[0].type = "zzz"


def _far_future(e: MatchExport) -> None:
    e.events[5].timestamp.seconds = 2**62


def _negative_nanos(e: MatchExport) -> None:
    e.events[5].timestamp.nanos = -3


def _second_created(e: MatchExport) -> None:
    e.events[7].type = "match_created"


def _gap(e: MatchExport) -> None:
    e.events[7].seq = 99


def _type_lies(e: MatchExport) -> None:
    e.events[8].type = "no_such_kind"


def _seat_out_of_range(e: MatchExport) -> None:
    e.events[8].seat = 7


def _visibility_out_of_range(e: MatchExport) -> None:
    e.events[8].visibility.seats.append(12)


def _garbage_command(e: MatchExport) -> None:
    first = next(env for env in e.events if env.command)
    first.command = b"\xff\xff"


def _garbage_created(e: MatchExport) -> None:
    e.events[0].payload = b"\xff\xff\xff"


def _seats(n: int) -> Callable[[MatchExport], None]:
    def mutate(e: MatchExport) -> None:
        created = MatchCreated.FromString(e.events[0].payload)
        created.seats = n
        e.events[0].payload = created.SerializeToString(deterministic=True)
        e.seats = n
    return mutate


def _unknown_game(e: MatchExport) -> None:
    created = MatchCreated.FromString(e.events[0].payload)
    created.game_id = "chess"
    e.events[0].payload = created.SerializeToString(deterministic=True)
    e.game_id = "chess"


def _command_id(command_id: str) -> Callable[[MatchExport], None]:
    def mutate(e: MatchExport) -> None:
        for env in e.events:
            if env.command_id:
                env.command_id = command_id
    return mutate


def _seat_info(**fields: str) -> Callable[[MatchExport], None]:
    def mutate(e: MatchExport) -> None:
        created = MatchCreated.FromString(e.events[0].payload)
        created.seat_info.add(seat=0, **fields)
        e.events[0].payload = created.SerializeToString(deterministic=True)
    return mutate


MUTATIONS = {
    "garbage payload": (_garbage_payload, ("InvalidArgument", "bad_export")),
    "first event not match_created": (_not_created, ("InvalidArgument", "bad_export")),
    "time out of range": (_far_future, ("InvalidArgument", "bad_export")),
    "negative nanos": (_negative_nanos, ("InvalidArgument", "bad_export")),
    "second match_created": (_second_created, ("InvalidArgument", "bad_export")),
    "seq gap": (_gap, ("InvalidArgument", "bad_export")),
    "type not the payload's kind": (_type_lies, ("InvalidArgument", "bad_export")),
    "acting seat out of range": (_seat_out_of_range, ("InvalidArgument", "bad_export")),
    "visibility seat out of range": (_visibility_out_of_range, ("InvalidArgument", "bad_export")),
    "garbage command": (_garbage_command, ("InvalidArgument", "bad_export")),
    "garbage match_created": (_garbage_created, ("InvalidArgument", "bad_export")),
    "seats beyond the game": (_seats(2**31 - 1), ("InvalidArgument", "bad_export")),
    "unknown game": (_unknown_game, ("FailedPrecondition", "unknown_game")),
    # What the read models' columns hold (PostgreSQL: VARCHAR lengths, no NUL in text): beyond
    # it, the projection fails on the match again and again, then parks it (never listed).
    "command id with a NUL": (_command_id("c\x00"), ("InvalidArgument", "bad_export")),
    "command id too long": (_command_id("c" * 129), ("InvalidArgument", "bad_export")),
    "display name with a NUL": (_seat_info(display_name="Vito\x00"), ("InvalidArgument", "bad_export")),
    "display name too long": (_seat_info(display_name="n" * 201), ("InvalidArgument", "bad_export")),
    "policy too long": (_seat_info(policy="p" * 65), ("InvalidArgument", "bad_export")),
}


@pytest.mark.parametrize("label", sorted(MUTATIONS))
def test_import_refuses_what_other_services_cannot_read_even_unverified(label: str) -> None:
    mutate, expected = MUTATIONS[label]
    store = InMemoryEventStore()
    app = _app(store)
    export = _export()
    mutate(export)
    data = dump(export, binary=True)
    op = SIGNER.operator_token()
    for allow in (False, True):
        assert _code(lambda a=allow: app.import_file(data, token=op, new_match_id="m-bad",  # noqa: B023
                                                      allow_unverified=a)) == expected, (label, allow)
    assert store.read("m-bad") == []
    app.verify_file(data)  # VerifyMatch(file) answers a report (times are not its business), never crashes


class _Brittle:
    """The toy engine, except that its fold refuses a match's opening event once the match has begun
    (as a real engine's evolve may raise on an event it never produces in that state)."""

    def __init__(self, inner: Any, opening: str) -> None:
        self._inner, self._opening = inner, opening

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def evolve(self, state: Any, event: Any) -> Any:
        if state is not None and event.WhichOneof("kind") == self._opening:
            raise KeyError("an opening event in a running match")
        return self._inner.evolve(state, event)


def test_import_refuses_a_match_the_engine_cannot_fold() -> None:
    export = _export()
    store = InMemoryEventStore()
    brittle = Registry({TOY: _Brittle(registry().get(TOY), export.events[1].type)})  # type: ignore[dict-item]
    app = bootstrap(store=store, cold=MemorySource(), registry=brittle, settings=Settings(secret=SECRET),
                    replay_settings=ReplaySettings())
    op = SIGNER.operator_token()
    assert app.import_file(dump(export), token=op, new_match_id="m-good")[2].ok
    # Well-formed events in an order no match could have: its opening event again at the end.
    extra = export.events.add()
    extra.CopyFrom(export.events[1])
    extra.seq = len(export.events)
    with pytest.raises(FailedPrecondition) as caught:
        app.import_file(dump(export), token=op, new_match_id="m-bad", allow_unverified=True)
    assert caught.value.code == "unreadable_match" and f"seq {extra.seq}" in caught.value.message
    assert store.read("m-bad") == []


def test_import_refuses_a_bad_match_id() -> None:
    app = _app()
    for bad in ("", " spaced", "x" * 200, "new\nline"):
        assert _code(lambda b=bad: app.import_file(dump(_export()), token=SIGNER.operator_token(),
                                                   new_match_id=b or "\t")) == ("InvalidArgument", "bad_match_id")



def test_import_refuses_a_match_id_the_archive_holds() -> None:
    """A finished match trimmed from Redis lives on in the projection's archive, which replay
    reads it from: its id is taken even where the event store no longer knows it (a Redis
    restored from an older AOF, a new Redis beside the old database). Before, such an id was
    free to ImportMatch: the imported events went to Redis while the archive kept the old
    ones, so the match replayed as the import until the sweep trimmed it and as the old match
    after, and the projection archived the import's later seqs on top of the old match's."""
    archived = copy(recorded(TOY, 3))  # played and archived here, then trimmed
    cold = MemorySource()
    cold.add(archived)
    store = InMemoryEventStore()  # a store that does not hold it (any more)
    app = bootstrap(store=store, cold=cold, registry=registry(), settings=Settings(secret=SECRET),
                    replay_settings=ReplaySettings())
    match_id = archived[0].match_id
    assert app.timeline(match_id).last_seq == len(archived)
    data = dump(_export())  # another match, asked to go in under the archived one's id
    token = SIGNER.operator_token()
    assert _code(lambda: app.import_file(data, token=token, new_match_id=match_id)) == (
        "AlreadyExists", "match_exists")
    assert store.read(match_id) == [] and store.version(match_id) == 0
    assert [e.event_id for e in app.timeline(match_id).envelopes] == [e.event_id for e in archived]
    assert app.import_file(data, token=token, new_match_id="m-free")[0] == "m-free"

def test_options_the_game_cannot_read_are_a_setup_divergence_never_a_crash() -> None:
    app = _app()
    export = _export(options={"turns": "many"})  # the toy's setup: int("many") -> ValueError
    export.options["turns"] = "many"
    data = dump(export)
    report = app.verify_file(data)
    assert not report.ok and report.divergence is not None and report.divergence.reason == "setup"
    assert "ValueError" in report.divergence.detail
    assert _code(lambda: app.import_file(data, token=SIGNER.operator_token(), new_match_id="m-opt")) == (
        "FailedPrecondition", "unverified")


def test_a_command_the_engine_crashes_on_is_a_refused_divergence() -> None:
    app = _app()
    export = _export()
    first = next(env for env in export.events if env.command)
    first.seat = 1_000  # engines index seats: IndexError, not RuleViolation
    export.commands[0].seat = 1_000
    with pytest.raises(InvalidArgument):  # the acting seat is out of range: never stored
        app.import_file(dump(export), token=SIGNER.operator_token(), new_match_id="m-seat", allow_unverified=True)
    report = app.verify_file(dump(export))
    assert not report.ok and report.divergence is not None and report.divergence.seq == first.seq


# -- garbage already stored (by an older server) ----------------------------------------------------------
def test_a_stored_garbage_payload_reads_as_failed_precondition_everywhere() -> None:
    envelopes = copy(recorded(TOY, 5))
    envelopes[10].payload = b"\xff\xff\xff"
    store = InMemoryEventStore()
    store.append(envelopes[0].match_id, 0, envelopes)
    app = _app(store)
    match_id = envelopes[0].match_id
    calls: dict[str, Callable[[], object]] = {
        "ListMatchEvents": lambda: app.list_events(match_id, None),
        "StreamReplay": lambda: list(app.replay(None, match_id=match_id)),
        "GetStateAt": lambda: app.state_at(envelopes[3].event_id, None, match_id=match_id),
        "ExportMatch": lambda: app.export(match_id),
        "VerifyMatch": lambda: app.verify_match(match_id),
    }
    for name, call in calls.items():
        assert _code(call) == ("FailedPrecondition", "unreadable_event"), name


def test_an_event_kind_a_newer_server_wrote_is_named_as_such() -> None:
    """An event whose kind this code does not know parses (an unknown field) and sets nothing: the
    refusal says so, rather than the engine's `KeyError: None`."""
    envelopes = copy(recorded(TOY, 5))
    envelopes[10].payload = b"\xb8\x3e\x01"  # field 999 = 1: no kind this engine has
    store = InMemoryEventStore()
    store.append(envelopes[0].match_id, 0, envelopes)
    with pytest.raises(FailedPrecondition) as refused:
        _app(store).list_events(envelopes[0].match_id, None)
    assert refused.value.code == "unreadable_event"
    assert "event kind this server's" in refused.value.message and "KeyError" not in refused.value.message


@pytest.mark.parametrize("broken", ["undecodable", "unfoldable"])
def test_an_unreadable_hidden_event_is_named_by_its_seq_only(broken: str) -> None:
    """The refusal reaches whoever asked, a spectator too: it named the event's id (a ULID whose
    first part is the millisecond it was made, hidden from a player in ListMatchEvents), its
    stored type (hidden too) and the engine's exception, which may quote the event's contents.
    It names the seq (ListMatchEvents shows every event's); the log has the rest."""
    from famiglia.v1.envelope_pb2 import VisibilityKind

    envelopes = copy(recorded(TOY, 5))
    payloads = [e.payload for e in envelopes]
    hidden = next(e for e in envelopes[2:] if e.visibility.kind != VisibilityKind.Value("VISIBILITY_PUBLIC")
                  and payloads.count(e.payload) == 1)
    secret = "the-hidden-card-is-ACE"
    if broken == "undecodable":
        hidden.payload = b"\xff\xff\xff"
    store = InMemoryEventStore()
    store.append(envelopes[0].match_id, 0, envelopes)
    app = _app(store)
    app.timelines.registry = _Raising(registry(), hidden.payload, secret)  # type: ignore[assignment]
    with pytest.raises(FailedPrecondition) as refused:
        app.state_at(envelopes[1].event_id, None, match_id=envelopes[0].match_id)
    message = refused.value.message
    assert refused.value.code == "unreadable_event" and f"event {hidden.seq} " in message
    assert hidden.event_id not in message and hidden.event_id[:10] not in message
    assert hidden.type not in message and secret not in message and "Error" not in message


class _Raising:
    """A registry whose engines fail to fold the event `payload`, quoting `secret` (as an
    engine's error may quote the event it could not fold)."""

    def __init__(self, inner: Registry, payload: bytes, secret: str) -> None:
        self.inner, self.payload, self.secret = inner, payload, secret

    def get(self, game_id: str) -> Any:
        return _RaisingEngine(self.inner.get(game_id), self.payload, self.secret)


class _RaisingEngine:
    def __init__(self, engine: Any, payload: bytes, secret: str) -> None:
        self._engine, self._payload, self._secret = engine, payload, secret

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def evolve(self, state: Any, event: Any) -> Any:
        if event.SerializeToString() == self._payload:
            raise ValueError(f"cannot fold {self._secret}")
        return self._engine.evolve(state, event)


def test_non_ascii_tokens_are_bad_tokens_not_errors() -> None:
    envelopes = copy(recorded(TOY, 5))
    store = InMemoryEventStore()
    store.append(envelopes[0].match_id, 0, envelopes)
    app = _app(store)
    for token in ("x.é", "é", "é.é", "\u00ff.\u00ff"):
        with pytest.raises(Unauthenticated):
            app.state_at(envelopes[3].event_id, token)
        with pytest.raises(Unauthenticated):
            app.list_events(envelopes[0].match_id, token)


def test_a_stored_impossible_time_is_shown_not_a_server_error() -> None:
    envelopes = copy(recorded(TOY, 5))
    envelopes[6].timestamp.seconds = 2**62  # stored by a server without admission
    store = InMemoryEventStore()
    store.append(envelopes[0].match_id, 0, envelopes)
    app = _app(store)
    match_id = envelopes[0].match_id
    app._sleep = lambda _: None
    assert len(app.list_events(match_id, None, page_size=1000).events) == len(envelopes)
    assert len(list(app.replay(None, match_id=match_id, full=True, recorded_pace=True))) == len(envelopes)
    assert dump(app.export(match_id), binary=True)
