"""Replay, verification and the CLI where a record is forged or odd: hidden events while
stepping, a forged acting seat, a visibility kind this server lacks, an event of another match,
an import no reader could show."""

from __future__ import annotations

import pytest

from famiglia.auth import TokenSigner
from famiglia.cli import replay as cli
from famiglia.config import Settings
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.grpcutil.errors import AppError
from famiglia.replay.sources import MemorySource
from famiglia.replay.verify import verify_envelopes
from famiglia.v1 import replay_service_pb2 as pb
from services.replay.bootstrap import ReplaySettings, bootstrap
from services.replay.entrypoints.grpc_server import _state_reply
from tests.unit.replay.games import copy, recorded, registry

SECRET = "unit-test-secret"
TOY = "replay_toy"


def _app(store: InMemoryEventStore):
    return bootstrap(store=store, cold=MemorySource(), registry=registry(), settings=Settings(secret=SECRET),
                     replay_settings=ReplaySettings())


def _running_toy(seed: int = 3):
    envelopes = copy(recorded(TOY, seed))
    commands = [e.seq for e in envelopes if e.command]
    cut = envelopes[:commands[len(commands) // 2]]
    store = InMemoryEventStore()
    store.append(cut[0].match_id, 0, cut)
    return store, cut


class _InProcessClient:
    """What `famiglia replay EVENT_ID` talks to, answered by the use cases (as the gRPC layer does)."""

    def __init__(self, app) -> None:
        self.app = app

    def state_at(self, event_id, *, token=None, full=False, match_id=""):
        return _state_reply(self.app.state_at(event_id, token, full=full, match_id=match_id))

    def events(self, match_id, *, token=None, page_size=1000):
        page = self.app.list_events(match_id, token, page_size)
        return [pb.MatchEventInfo(event_id=i.event_id, seq=i.envelope.seq, type=i.type, seat=i.seat,
                                  hidden=i.hidden) for i in page.events]


class _Quiet:
    def print(self, *_a, **_k) -> None:
        pass


def test_cli_stepping_walks_past_events_hidden_from_the_asker() -> None:
    """`famiglia replay EVENT_ID` then `n` ... on a running match as a spectator: the listing
    has hidden events (event_id ""); stepping goes past them (before, it asked GetStateAt("")
    and the session ended with INVALID_ARGUMENT no_event_id)."""
    store, envelopes = _running_toy()
    app = _app(store)
    start = next(e for e in envelopes if e.type == "cards_dealt")  # public; hidden card_taken events follow
    keys = iter(["n"] * len(envelopes) + ["q"])
    try:
        code = cli.step_through(_InProcessClient(app), start.event_id, ask=lambda _: next(keys), out=_Quiet())
    except AppError as exc:  # over gRPC: RpcError INVALID_ARGUMENT, exit code 2
        pytest.fail(f"stepping stopped at a hidden event: {type(exc).__name__} {exc.code}")
    assert code == 0


def test_verification_checks_who_acted_on_every_event_of_a_command() -> None:
    """A command's events all carry its seat; a record that attributes one of them to another
    seat was not produced by this match, yet verifies (and replays show the forged seat)."""
    envelopes = copy(recorded(TOY))
    draw = next(e for e in envelopes if e.type == "card_drawn" and e.command)
    taken = envelopes[draw.seq]  # the same command's private card_taken
    assert taken.command_id == draw.command_id and not taken.command
    taken.seat = 1 - draw.seat
    report = verify_envelopes(registry(), envelopes)
    assert not report.ok, "a forged acting seat verified"


def test_verification_checks_that_setup_events_are_the_servers() -> None:
    envelopes = copy(recorded(TOY))
    envelopes[2].seat = 0  # a hand_dealt of setup, claimed to be seat 0's action
    assert not verify_envelopes(registry(), envelopes).ok


def test_get_state_at_refuses_an_event_that_is_not_in_the_named_match() -> None:
    """GetStateAt(event_id, match_id=A) for an event of match B is refused (before, B's state
    was answered, silently: the caller asked about A)."""
    store = InMemoryEventStore()
    a, b = copy(recorded(TOY, 3)), copy(recorded(TOY, 11))
    for envelopes in (a, b):
        store.append(envelopes[0].match_id, 0, envelopes)
    app = _app(store)
    with pytest.raises(AppError) as refused:
        app.state_at(b[5].event_id, None, match_id=a[0].match_id)
    assert refused.value.code == "event_not_in_match"


def test_verify_reports_an_unknown_visibility_kind_instead_of_crashing(tmp_path) -> None:
    """VerifyMatch(file) / `famiglia replay verify FILE` on a file whose event names a visibility
    kind this server does not know is a `visibility` divergence (before, the detail built
    VisibilityKind(99): ValueError, INTERNAL from the service and a traceback from the CLI)."""
    from famiglia.replay.export import build_export, dump
    from famiglia.replay.verify import verify_export

    export = build_export(registry(), copy(recorded(TOY)))
    target = export.events[len(export.events) // 2]
    target.visibility.kind = 99
    report = verify_export(registry(), export)  # raises ValueError today
    assert not report.ok and report.divergence.seq == target.seq
    path = tmp_path / "m.json"
    path.write_bytes(dump(export))
    monkey = pytest.MonkeyPatch()
    monkey.setattr(cli, "_registry", registry)
    try:
        assert cli.verify_file(path, out=_Quiet()) == 1
    finally:
        monkey.undo()


def test_an_imported_match_that_is_stored_can_be_read_without_a_server_error() -> None:
    """Admission shows every state as readers do: an (allow_unverified) import whose Good
    Critters action card is one the game lacks is refused (before, it was stored and then
    GetStateAt(full) / StreamReplay(full) raised KeyError in render_state: INTERNAL)."""
    from famiglia.replay.export import build_export, dump
    from famiglia.v1.envelope_pb2 import EventEnvelope  # noqa: F401

    game = "goodcritters"
    eng = registry().get(game)
    envelopes = copy(recorded(game))
    target = next(e for e in envelopes if e.type == "action_card_chosen")
    event = eng.info.event_type.FromString(target.payload)
    event.action_card_chosen.card = 50
    target.payload = event.SerializeToString(deterministic=True)
    store = InMemoryEventStore()
    app = _app(store)
    token = TokenSigner(SECRET).operator_token()
    try:
        app.import_file(dump(build_export(registry(), envelopes), binary=True), token=token,
                        new_match_id="m-odd", allow_unverified=True)
    except AppError:
        return  # refused at the door: fine
    timeline = app.timeline("m-odd")
    for env in timeline.envelopes:
        try:
            app.state_at(env.event_id, None, full=True)
        except AppError:
            pass
    try:
        list(app.replay(None, match_id="m-odd", full=True))
    except AppError:
        pass
