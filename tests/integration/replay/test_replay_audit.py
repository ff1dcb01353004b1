"""An audit of replay on a real stack, for every game: the state at every event of real matches
(played through the command service, several seat counts and options) is the fold of the events
up to it, as every seat, a spectator and the full view see it, from Redis and again once the
projection archived the match and the retention sweep trimmed it; hidden information stays
hidden in a seat's replay (the view fields added in session 28 among it); export, import and
verification keep and check what docs/replay.md says; edge event ids answer as documented."""

from __future__ import annotations

import random
import time

import grpc
import pytest
from google.protobuf import text_format

from famiglia.config import Settings
from famiglia.engine import pending_for
from famiglia.eventstore.envelopes import MATCH_CREATED, open_event, open_match_created
from famiglia.grpcutil.errors import error_code
from famiglia.replay.client import ReplayClient, operator_token
from famiglia.replay.export import dump, load
from famiglia.replay.sources import sql_archive_source
from famiglia.replay.toy import GAME_ID
from famiglia.v1.replay_service_pb2 import MatchExport

from ...profile import SOAK
from ...unit.replay.games import registry
from .conftest import SECRET, Played, Stack, play, start_replay

readmodels = pytest.importorskip("famiglia.readmodels", reason="SQL archive: no famiglia.readmodels")
pytestmark = pytest.mark.redis

#: (game, seats, options, seed): each game at its fewest seats with its defaults, and at more
#: seats with variants; `make test` plays three of the shorter ones, `make soak` all.
MATCHES = [
    ("goodcritters", 4, {}, 3),
    ("goodcritters", 5, {"step3_mode": "turns", "payoff.enabled": "true", "loot_copies_per_value_and_type": "2",
                         "stash_counts_public": "false"}, 4),
    ("nothing_personal", 3, {}, 5),
    ("nothing_personal", 4, {"reroll_tokens": "true", "keep_your_word": "true", "arrest_associates": "true"}, 6),
    ("nostra_city", 3, {}, 7),
    ("nostra_city", 5, {"verdict_count_mode": "value_weighted", "first_player_seat": "2"}, 8),
    ("grifters", 2, {}, 9),
    ("grifters", 4, {"auto_single_option": "false", "hideout_tokens_score": "true"}, 10),
]
if not SOAK:
    MATCHES = [MATCHES[1], MATCHES[4], MATCHES[6]]  # a Nothing Personal match folds for ~20 s a core


def _id(match: tuple) -> str:
    game, seats, options, _ = match
    return f"{game}-{seats}p" + ("-variants" if options else "")


def _archive_and_sweep(stack: Stack, url: str, match_ids: list[str]) -> None:
    """What production does to a finished match: the projection archives it, then the retention
    sweep trims it from Redis."""
    from services.projection.bootstrap import bootstrap as projection_bootstrap
    from services.projection.retention import RetentionSweep

    projection = projection_bootstrap(store=stack.store, sql=readmodels.make_engine(url), registry=registry(),
                                      settings=Settings(secret="x", redis_url=stack.redis_url))
    projection.migrate()
    runner = projection.runner("replay-audit")
    versions = {m: stack.store.version(m) for m in match_ids}
    for _ in range(400):
        runner.run_once(block_ms=50)
        with readmodels.read_session(projection.sql) as session:
            if all(readmodels.archived_version(session, m) == v for m, v in versions.items()):
                break
    else:
        raise AssertionError("the projection did not archive the matches")
    sweep = RetentionSweep(stack.store, projection.sql, retain_ms=1, clock=lambda: time.time() + 3600)
    report = sweep.sweep()
    projection.sql.dispose()
    assert report.trimmed == len(match_ids), report
    assert all(stack.store.read(m) == [] for m in match_ids), "the sweep left events in Redis"


def _unpack(any_message, engine):
    view = engine.info.view_type()
    assert any_message.Unpack(view)
    return view


def _pending(asks) -> list[tuple[int, int, str]]:
    return [(p.seat, int(p.kind), p.label) for p in asks]


def _states_checked_against_the_fold(client: ReplayClient, played: Played, envelopes: list) -> list[bytes]:
    """GetStateAt at every event as a spectator, each seat and the full view, each checked against
    the fold of the events up to it; the answers' bytes."""
    created = open_match_created(envelopes[0])
    engine, seats = registry().get(created.game_id), created.seats
    answers: list[bytes] = []
    state = None
    for env in envelopes:
        if env.type != MATCH_CREATED:
            state = engine.evolve(state, open_event(engine, env))
        asked = [(None, None, False), *((seat, played.tokens[seat], False) for seat in range(seats)),
                 (None, None, True)]
        for seat, token, full in asked:
            at = client.state_at(env.event_id, token=token, full=full)
            answers.append(at.SerializeToString())
            where = (env.seq, seat, full)
            assert (at.seq, at.event_id, at.last_seq, at.match_finished) == (
                env.seq, env.event_id, len(envelopes), True), where
            if state is None:  # match_created: the setup as text, the seed in full only
                assert not at.HasField("view") and ("seed" in at.text) == full, where
                continue
            assert at.game_over == (engine.result(state) is not None), where
            if full:
                assert at.text == engine.render_state(state), where
                assert [_unpack(v, engine) for v in at.seat_views] == [engine.view(state, s) for s in range(seats)]
                assert _pending(at.to_act) == _pending(engine.pending(state)), where
            else:
                view = engine.view(state, seat)
                assert _unpack(at.view, engine) == view and at.text == text_format.MessageToString(view), where
                assert _pending(at.to_act) == _pending(pending_for(engine, state, seat)), where
    return answers


def _streams(client: ReplayClient, played: Played) -> list[list[bytes]]:
    """StreamReplay (each event with the view after it) for the full view, a spectator and each seat."""
    askers = [(None, True), (None, False), *((token, False) for token in played.tokens)]
    return [[s.SerializeToString() for s in client.stream(match_id=played.match_id, token=token, full=full)]
            for token, full in askers]


@pytest.mark.slow
@pytest.mark.parametrize("match", MATCHES, ids=_id)
def test_the_state_at_every_event_is_the_fold_hot_and_once_archived_and_trimmed(stack: Stack, tmp_path,
                                                                                 match: tuple) -> None:
    """From Redis, every viewer at every event; once the projection archived the match and the
    retention sweep trimmed it, a fresh service answers from the SQL archive byte for byte alike:
    the full view (every seat's view in it) at every event, and each viewer's stream of views."""
    game_id, seats, options, seed = match
    played = play(stack.commands, game_id, seats, seed=seed, options=options)
    envelopes = stack.store.read(played.match_id)
    hot = _states_checked_against_the_fold(stack.client, played, envelopes)
    streams = _streams(stack.client, played)
    url = f"sqlite:///{tmp_path / 'archive.db'}"
    _archive_and_sweep(stack, url, [played.match_id])
    server, address = start_replay(stack.store, sql_archive_source(url))  # a fresh process: nothing cached
    client = ReplayClient(address)
    try:
        full_at_every_event = hot[seats + 1::seats + 2]
        assert [client.state_at(e.event_id, full=True).SerializeToString() for e in envelopes] == full_at_every_event
        assert _streams(client, played) == streams
        some = envelopes[::max(1, len(envelopes) // 25)]
        assert [client.state_at(e.event_id, token=played.tokens[-1]).SerializeToString() for e in some] == [
            hot[(e.seq - 1) * (seats + 2) + seats] for e in some]
    finally:
        client.close()
        server.stop(grace=None)


# -- export, import, verification ---------------------------------------------------------------------
GAMES = [g for g in registry() if g != GAME_ID]
UNCHECKED = {"events.event_id", "events.timestamp", "events.trace", "generator", "exported_at", "commands.text",
             "commands.command_type"}
"""What a re-run cannot check (docs/replay.md, "Verification"): a file may claim any of them."""


def _changed(a: MatchExport, b: MatchExport) -> set[str]:
    """The fields (`events.seat`, `generator`, ...) in which two exports differ."""
    out: set[str] = set()
    for f in a.DESCRIPTOR.fields:
        mine, theirs = getattr(a, f.name), getattr(b, f.name)
        if f.name in ("events", "commands"):
            if len(mine) != len(theirs):
                out.add(f"{f.name}.<count>")
            for x, y in zip(mine, theirs, strict=False):
                out |= {f"{f.name}.{g.name}" for g in x.DESCRIPTOR.fields if getattr(x, g.name) != getattr(y, g.name)}
        elif mine != theirs:
            out.add(f.name)
    return out


@pytest.mark.parametrize("game_id", GAMES)
def test_any_changed_byte_of_an_export_fails_verification_unless_it_is_a_claim_no_rerun_checks(
        stack: Stack, game_id: str) -> None:
    """One bit flipped anywhere in a binary export: the file is no export (`bad_export`), or
    VerifyMatch reports a divergence with a stable reason, or what changed is one of the claims
    docs/replay.md lists as unchecked (event ids, times, trace context, generator, export time,
    command texts) or a name emptied (game and payload names are checked where a file gives them).
    Then the named kinds of tampering, each with its reason and seq."""
    engine = registry().get(game_id)
    played = play(stack.commands, game_id, engine.info.min_players, seed=21)
    data = stack.client.export(played.match_id, binary=True).file
    export = load(data)
    chooser = random.Random(game_id)
    for _ in range(40):
        flipped = bytearray(data)
        flipped[chooser.randrange(len(data))] ^= 1 << chooser.randrange(8)
        try:
            report = stack.client.verify(data=bytes(flipped))
        except grpc.RpcError as refused:
            assert (refused.code(), error_code(refused)) == (grpc.StatusCode.INVALID_ARGUMENT, "bad_export")
            continue
        if report.ok:
            tampered = load(bytes(flipped))
            what = _changed(export, tampered) - UNCHECKED
            emptied = {w for w in what if w in ("events.game_id", "events.payload_type", "event_type", "command_type")}
            assert what == emptied, f"a changed {what} verifies"
            assert all(not getattr(b, w.split(".")[1]) for a, b in zip(export.events, tampered.events, strict=True)
                       for w in emptied if w.startswith("events.") and getattr(a, w.split(".")[1]) != getattr(
                           b, w.split(".")[1])), what
            assert all(not getattr(tampered, w) for w in emptied if "." not in w), what
        else:
            assert report.divergence.reason in REASONS, report.divergence

    mid = next(e.seq for e in export.events[len(export.events) // 2:] if e.command)
    follower = mid + 1 if export.events[mid].command_id == export.events[mid - 1].command_id and \
        not export.events[mid].command else None

    def verdict(change) -> tuple[int, str]:
        copy = MatchExport()
        copy.CopyFrom(export)
        change(copy)
        report = stack.client.verify(data=dump(copy))
        assert not report.ok, change
        return report.divergence.seq, report.divergence.reason

    def at(seq: int):
        return lambda e: e.events[seq - 1]

    assert verdict(lambda e: setattr(at(mid)(e), "payload", at(mid)(e).payload + b"\x08\x01")) == (mid, "payload")
    assert verdict(lambda e: setattr(at(mid)(e), "type", "x")) == (mid, "type")
    assert verdict(lambda e: setattr(at(mid)(e), "payload_type", "x")) == (mid, "type")
    assert verdict(lambda e: setattr(at(mid)(e).visibility, "kind", 3 - at(mid)(e).visibility.kind % 3)) == (
        mid, "visibility")
    assert verdict(lambda e: setattr(at(mid)(e), "match_id", "other")) == (mid, "format")
    assert verdict(lambda e: setattr(at(mid)(e), "game_id", "other")) == (mid, "format")
    assert verdict(lambda e: setattr(at(mid)(e), "command", at(mid)(e).command + b"\x08\x01")) == (mid, "format")
    assert verdict(lambda e: setattr(at(mid)(e), "command_id", "forged")) == (mid, "format")
    if follower is not None:
        assert verdict(lambda e: setattr(at(follower)(e), "seat", (at(follower)(e).seat + 1) % 2)) == (
            follower, "seat")
    assert verdict(lambda e: e.events.insert(mid, e.events[mid - 1])) in {(mid, "format"), (mid + 1, "format")}
    dropped = verdict(lambda e: e.events.pop(mid - 1))
    assert dropped[1] == "format" and dropped[0] >= mid
    assert verdict(lambda e: _swap(e, mid))[1] == "format"  # order
    for created_field, value in (("seat", 0), ("command_id", "x"), ("payload_type", "x"), ("game_id", "x")):
        assert verdict(lambda e, f=created_field, v=value: setattr(e.events[0], f, v)) == (1, "format"), created_field
    assert verdict(lambda e: setattr(e.events[0].visibility, "kind", 1)) == (1, "format")
    assert verdict(lambda e: setattr(e, "event_type", "x")) == (1, "format")
    assert verdict(lambda e: setattr(e, "command_type", "x")) == (1, "format")
    labelled = MatchExport()
    labelled.CopyFrom(export)
    labelled.commands[2].command_type = "x"  # a label, as its text (tests/e2e/test_hostile_input.py)
    assert stack.client.verify(data=dump(labelled)).ok


REASONS = {"payload", "type", "visibility", "seat", "missing", "extra", "refused", "setup", "format"}


def _first_seq(export: MatchExport, i: int) -> int:
    return export.commands[i].first_seq


def _swap(export: MatchExport, seq: int) -> None:
    a, b = export.events[seq - 1], export.events[seq]
    kept = type(a)()
    kept.CopyFrom(a)
    a.CopyFrom(b)
    b.CopyFrom(kept)


@pytest.mark.parametrize("game_id", GAMES)
def test_an_import_keeps_every_field_but_event_ids_match_id_and_attribution(stack: Stack, game_id: str) -> None:
    """docs/replay.md, "Importing": seqs, payloads, commands and times are kept (and every other
    envelope field); event ids are fresh, the match id the one asked; the copy verifies and
    replays as the original (its views at every event)."""
    engine = registry().get(game_id)
    played = play(stack.commands, game_id, engine.info.max_players, seed=22)
    original = load(stack.client.export(played.match_id, binary=True).file)
    answer = stack.client.import_file(dump(original, binary=True), token=operator_token(SECRET),
                                      new_match_id=f"copy-{game_id}")
    assert answer.verification.ok and answer.version == len(original.events)
    copy = load(stack.client.export(f"copy-{game_id}", binary=True).file)
    assert _changed(original, copy) == {"events.event_id", "events.match_id", "match_id", "exported_at"}
    assert all(a.event_id != b.event_id for a, b in zip(original.events, copy.events, strict=True))
    assert stack.client.verify(match_id=f"copy-{game_id}").ok
    full = [s.view for s in stack.client.stream(match_id=played.match_id, full=True)]
    assert [s.view for s in stack.client.stream(match_id=f"copy-{game_id}", full=True)] == full


def test_an_old_record_whose_engine_changed_is_refused_unverified_and_reports_where_over_the_wire(
        stack: Stack) -> None:
    """docs/replay.md, "Old records": a record today's decide parts from is `unverified` at import
    (without allow_unverified), stored with it, shown at every event, and VerifyMatch names the
    seq and reason its manifest entry says."""
    import gzip
    import json

    from ...unit.replay.test_old_records import FIXTURES

    manifest = json.loads((FIXTURES / "manifest.json").read_text())
    parted = [name for name, want in manifest.items() if want["verify"] != "ok"]
    assert parted
    for name in parted:
        data = gzip.decompress((FIXTURES / name).read_bytes())
        new_id = "old-" + name.split(".")[0]
        with pytest.raises(grpc.RpcError) as refused:
            stack.client.import_file(data, token=operator_token(SECRET), new_match_id=new_id)
        assert (refused.value.code(), error_code(refused.value)) == (grpc.StatusCode.FAILED_PRECONDITION,
                                                                   "unverified")
        report = stack.client.verify(data=data)
        assert {"seq": report.divergence.seq, "reason": report.divergence.reason} == manifest[name]["verify"]
        answer = stack.client.import_file(data, token=operator_token(SECRET), new_match_id=new_id,
                                          allow_unverified=True)
        assert not answer.verification.ok and answer.verification.divergence.seq == report.divergence.seq
        listed = stack.client.events(new_id)
        assert [e.seq for e in listed] == list(range(1, manifest[name]["events"] + 1))
        shown = [e for e in listed if not e.hidden]  # a running match: hidden events have no id
        assert shown and all(stack.client.state_at(e.event_id).seq == e.seq for e in shown)


# -- edge event ids -------------------------------------------------------------------------------------
def _between(a: str, b: str) -> str:
    """An id sorting between two event ids (ULIDs) that is neither."""
    candidate = a[:-1] + ("1" if a[-1] == "0" else "0")
    return candidate if a < candidate < b or b < candidate < a else a + "0"


def _refusal(call) -> tuple:
    with pytest.raises(grpc.RpcError) as refused:
        call()
    return refused.value.code(), error_code(refused.value)


@pytest.mark.parametrize("game_id", GAMES)
def test_edge_event_ids_answer_as_documented_hot_and_from_the_archive(stack: Stack, tmp_path, game_id: str) -> None:
    """docs/replay.md, "GetStateAt": the creation event (no view, the setup as text, the seed in
    full only), the last (game over, nobody to act), an id between two events and malformed ids
    (`unknown_event`, `no_event_id`), another match's event (its own state, `event_not_in_match`
    when a match is named, `wrong_match` for this match's seat token); from Redis and from the
    SQL archive once trimmed."""
    engine = registry().get(game_id)
    played = play(stack.commands, game_id, engine.info.min_players, seed=23)
    other = play(stack.commands, game_id, engine.info.min_players, seed=24)
    envelopes, others = stack.store.read(played.match_id), stack.store.read(other.match_id)

    def check(client: ReplayClient) -> None:
        created = client.state_at(envelopes[0].event_id, token=played.tokens[0])
        assert (created.seq, created.HasField("view"), list(created.to_act)) == (1, False, [])
        assert created.text.startswith(f"match created: {game_id} for ") and "seed" not in created.text
        assert "seed" in client.state_at(envelopes[0].event_id, full=True).text
        assert [s.seq for s in client.stream(event_id=envelopes[0].event_id, to_seq=4, full=True)] == [2, 3, 4]
        last = client.state_at(envelopes[-1].event_id, full=True)
        assert (last.seq, last.last_seq, last.game_over, last.match_finished, list(last.to_act)) == (
            len(envelopes), len(envelopes), True, True, [])
        assert list(client.stream(event_id=envelopes[-1].event_id)) == []
        theirs = client.state_at(others[5].event_id)
        assert (theirs.match_id, theirs.seq) == (other.match_id, 6)
        assert _refusal(lambda: client.state_at(others[5].event_id, match_id=played.match_id)) == (
            grpc.StatusCode.INVALID_ARGUMENT, "event_not_in_match")
        assert _refusal(lambda: list(client.stream(event_id=others[5].event_id, match_id=played.match_id))) == (
            grpc.StatusCode.INVALID_ARGUMENT, "event_not_in_match")
        assert _refusal(lambda: client.state_at(others[5].event_id, token=played.tokens[0])) == (
            grpc.StatusCode.PERMISSION_DENIED, "wrong_match")
        assert _refusal(lambda: client.state_at("")) == (grpc.StatusCode.INVALID_ARGUMENT, "no_event_id")
        for odd in (_between(envelopes[7].event_id, envelopes[8].event_id), "not-an-event", "é" * 30,
                    "x" * 5000, envelopes[3].event_id.lower(), envelopes[3].event_id + " "):
            assert _refusal(lambda o=odd: client.state_at(o)) == (grpc.StatusCode.NOT_FOUND, "unknown_event"), odd
            assert _refusal(lambda o=odd: client.state_at(o, match_id=played.match_id)) == (
                grpc.StatusCode.NOT_FOUND, "unknown_event"), odd

    check(stack.client)
    url = f"sqlite:///{tmp_path / 'archive.db'}"
    _archive_and_sweep(stack, url, [played.match_id, other.match_id])
    server, address = start_replay(stack.store, sql_archive_source(url))
    client = ReplayClient(address)
    try:
        check(client)
    finally:
        client.close()
        server.stop(grace=None)


# -- hidden information: the view fields of session 28, and Nostra City's of session 33 ----------------
#: View fields public by their rule (GC-H05, NC-H06, NP-H6, GR-H05; NC-H08 and NC-K55).
PUBLIC_FIELDS = [("goodcritters", "last_vote"), ("nostra_city", "revealed_bids"), ("nothing_personal", "roll_offs"),
                 ("grifters", "reshuffled"), ("nostra_city", "vendetta_reshuffled")]


def _seen(client: ReplayClient, match_id: str, token: str | None, engine) -> list[tuple[int, str, object, object]]:
    """(seq, type, event as shown, view after it) of a viewer's replay."""
    out = []
    for step in client.stream(match_id=match_id, token=token):
        event = None
        if step.HasField("event"):
            event = engine.info.event_type()
            step.event.Unpack(event)
        out.append((step.seq, step.type, event, _unpack(step.view, engine) if step.HasField("view") else None))
    return out


def _derived_from_public_events(game_id: str, field: str, public: list) -> None:
    """The field, as a spectator's view holds it, is what the public events told."""
    told: list = []
    revealed: dict[int, set[int]] = {}
    previous = None
    for _seq, kind, event, view in public:
        if view is None:
            continue
        shown = _field(view, field)
        if field == "vendetta_reshuffled":
            if previous is not None and shown != _field(previous, field):
                assert shown == sorted(previous.vendetta_discard), "a reshuffle shows the Vendetta discard pile"
        elif game_id == "nostra_city":
            told += [event.bids_revealed] if kind == "bids_revealed" else []
            assert all(r in told for r in shown), shown
        elif game_id == "nothing_personal":
            told += [event.roll_off] if kind == "roll_off" else []
            assert shown == told
        elif game_id == "goodcritters":
            if kind == "action_revealed":
                revealed.setdefault(event.action_revealed.seat, set()).add(event.action_revealed.card)
            if view.HasField("last_vote") and kind == "vote_counted":
                assert all(card == 0 or card in revealed.get(s, set()) for s, card in enumerate(view.last_vote.cards))
                revealed = {}
        elif game_id == "grifters" and kind == "discard_reshuffled":
            assert sorted(shown) == sorted(previous.discard), "a reshuffle shows the cards of the discard pile"
        previous = view


@pytest.mark.parametrize(("game_id", "field"), PUBLIC_FIELDS)
def test_a_seats_replay_shows_the_new_public_fields_as_everyone_sees_them_and_nothing_more(
        stack: Stack, game_id: str, field: str) -> None:
    """GC-H05 (last_vote), NC-H06 (revealed_bids), NP-H6 (roll_offs), GR-H05 (reshuffled), NC-K55 (vendetta_reshuffled): in a
    running match and in the history of a finished one, each seat's replay shows the field exactly
    as the spectator's at the same point (it is public: nothing of the seat's own, nothing of
    another's), and the spectator's is what the public events told; at the end every seat's view
    is the spectator's but for the viewer's own settings (everything is public then)."""
    engine = registry().get(game_id)
    seats = engine.info.max_players
    running = play(stack.commands, game_id, seats, seed=25, stop_after=60)
    finished = play(stack.commands, game_id, seats, seed=26)
    for seed in range(27, 35):  # a Grifters reshuffle takes a long match
        if field != "reshuffled" or any(e.type == "discard_reshuffled" for e in stack.store.read(finished.match_id)):
            break
        finished = play(stack.commands, game_id, seats, seed=seed)
    shown_at_all = False
    for played in (running, finished):
        public = _seen(stack.client, played.match_id, None, engine)
        _derived_from_public_events(game_id, field, public)
        for seat in range(seats):
            for seq, _kind, _event, view in _seen(stack.client, played.match_id, played.tokens[seat], engine):
                if view is None:
                    continue
                spectator = [v for s, _, _, v in public if s <= seq and v is not None][-1]
                assert _field(view, field) == _field(spectator, field), (game_id, seat, seq)
                shown_at_all = shown_at_all or bool(_field(view, field))
    if game_id != "nothing_personal":  # roll-offs only follow a tie at the end
        assert shown_at_all, f"no {field} was ever shown: the test checked nothing"
    last = stack.store.read(finished.match_id)[-1].event_id
    spectator = _unpack(stack.client.state_at(last).view, engine)
    for seat in range(seats):
        mine = _unpack(stack.client.state_at(last, token=finished.tokens[seat]).view, engine)
        for own in VIEWERS_OWN.get(game_id, ()) + ("viewer",):
            mine.ClearField(own)
            spectator.ClearField(own)
        assert mine == spectator, (game_id, seat)


def _field(view, field: str):
    """A view's field to compare: a repeated one as a list, a message one as the message (None unset)."""
    if field == "last_vote":
        return view.last_vote if view.HasField("last_vote") else None
    return list(getattr(view, field))


VIEWERS_OWN = {"nothing_personal": ("autopass_cards", "autopass_rerolls", "window_auto_me")}
"""View fields that are the viewer's own settings, not the table's."""
