"""What ImportMatch may store: a match every other service can read, whatever the file says.

Verification (`verify.py`) asks whether today's engine *reproduces* a match;
`allow_unverified` skips only that question. Admission asks whether the match
can be *stored* at all, and no flag skips it, because once the events are in
the event store the command service, the projection, replay and the bots read
them like any other match:

- seqs run 1..n; `match_created` is the first event and only the first; its
  payload parses; its game is registered here and seats what the game seats;
- every other payload parses as the game's Event and is the kind its envelope
  says, but for a `match_cancelled` (GameService.CancelMatch), which may only be
  the last event and parses as a `MatchCancelled`, and the seat changes (`seat_left`,
  `seat_returned`: who plays a seat), each well-formed where it stands and none after the
  match's end (`seat_changes.py`: a seat of the table, not a bot's, a known reason, taken
  back only from "timeouts"); a recorded command parses as the game's Command; payload and game
  names, where the envelope carries them, are the game's;
- timestamps are real times (1970 to 9999), the acting seat is -1 or a seat
  of the table, visibility kinds and seats are known ones;
- today's engine folds every event and reads the result without raising.

What is stored is a copy, not the file's bytes:

- **fresh event ids.** Event ids are globally unique (the projection's
  archive has a unique index on them), and a file's ids may already be here
  (the same match imported twice, or exported from this very server) or
  repeat inside the file. Each imported event gets a new ULID from its
  recorded time; seqs, payloads, commands and times are kept.
- **no attribution.** The players, tournament and series named in a file are
  claims nobody checked (verification re-runs commands, not seat assignments),
  so an imported match counts for no rating, no tournament and no series:
  `MatchCreated` is stored without its `tournament_id`, its `rematch_of` (a
  match of the server that exported it, if any: here it would make the import
  the rematch of whatever match holds that id) and the seats' `player_id`
  (display names, bot flags and policies stay, for people reading the replay).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from google.protobuf.message import DecodeError

from famiglia.engine import Engine
from famiglia.engine.registry import Registry, UnknownGame
from famiglia.eventstore.envelopes import MATCH_CANCELLED, MATCH_CREATED, SEAT_CHANGES, new_event_id
from famiglia.matchstate import MatchState
from famiglia.v1 import envelope_pb2
from famiglia.v1.envelope_pb2 import EventEnvelope, MatchCreated
from famiglia.v1.replay_service_pb2 import MatchExport

from .seat_changes import fold_away, seat_change_problem

MAX_SECONDS = 253_402_300_799
"""9999-12-31T23:59:59Z, the last second a protobuf Timestamp may hold."""
MATCH_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")
"""1-64 characters: what the read models' match_id columns hold (famiglia.readmodels.tables)."""
_KINDS = frozenset(envelope_pb2.VisibilityKind.values())


class Refused(Exception):
    """The match cannot be stored; `code` is stable, `precondition` says whose fault it is
    (False: the file is malformed; True: this server cannot read it)."""

    def __init__(self, code: str, message: str, *, precondition: bool = False) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.precondition = precondition


def stored_envelopes(registry: Registry, export: MatchExport, match_id: str, *, fresh_ids: bool = True
                     ) -> list[EventEnvelope]:
    """The envelopes to append for `export` stored as `match_id`, or Refused (module docstring)."""
    if not MATCH_ID.fullmatch(match_id):
        raise Refused("bad_match_id", f"match id {match_id[:80]!r} is not 1-64 letters, digits and ._:-")
    envelopes = [EventEnvelope.FromString(e.SerializeToString()) for e in export.events]
    created, engine = _check_created(registry, envelopes)
    _check_events(engine, created, envelopes)
    _check_fold(registry, envelopes)
    for env in envelopes:
        env.match_id = match_id
        if fresh_ids:
            env.event_id = new_event_id(env.timestamp.seconds * 1000 + env.timestamp.nanos // 1_000_000)
    unattributed = MatchCreated()
    unattributed.CopyFrom(created)
    unattributed.tournament_id = ""
    unattributed.rematch_of = ""
    for info in unattributed.seat_info:
        info.player_id = ""
    envelopes[0].payload = unattributed.SerializeToString(deterministic=True)
    return envelopes


def _check_created(registry: Registry, envelopes: Sequence[EventEnvelope]) -> tuple[MatchCreated, Engine]:
    if not envelopes:
        raise Refused("bad_export", "the file holds no events")
    first = envelopes[0]
    if first.type != MATCH_CREATED or first.seq != 1:
        raise Refused("bad_export", f"a match starts with match_created at seq 1, not {first.type!r}@{first.seq}")
    try:
        created = MatchCreated.FromString(first.payload)
    except DecodeError as exc:
        raise Refused("bad_export", f"the match_created payload does not parse: {exc}") from None
    try:
        engine = registry.get(created.game_id)
    except UnknownGame:
        raise Refused("unknown_game", f"this server has no game {created.game_id[:80]!r}",
                      precondition=True) from None
    info = engine.info
    if not info.min_players <= created.seats <= info.max_players:
        raise Refused("bad_export", f"{created.game_id} seats {info.min_players}..{info.max_players} players, "
                                    f"not {created.seats}")
    for seat in created.seat_info:  # kept (the player id is not): within what the read models' columns hold
        if not _storable(seat.display_name, 200) or not _storable(seat.policy, 64):
            raise Refused("bad_export", f"match_created: seat {seat.seat}'s display name (at most 200 characters) "
                                        "or policy (64) is too long or holds a NUL")
    return created, engine


def _storable(text: str, most: int) -> bool:
    """Whether a read model's text column holds `text`: at most `most` characters, no NUL
    (PostgreSQL refuses it; the projection would fail on the match, then park it)."""
    return len(text) <= most and "\x00" not in text


def _check_events(engine: Engine, created: MatchCreated, envelopes: Sequence[EventEnvelope]) -> None:
    event_type, command_type = engine.info.event_type, engine.info.command_type
    assert event_type is not None
    match_id, seats = envelopes[0].match_id, int(created.seats)
    bots = {info.seat for info in created.seat_info if info.bot}
    away: dict[int, str] = {}
    for seq, env in enumerate(envelopes, start=1):
        where = f"event {seq}"
        if env.seq != seq:
            raise Refused("bad_export", f"{where} has seq {env.seq}: seqs must run 1..n without a gap")
        if env.match_id != match_id:
            raise Refused("bad_export", f"{where} names match {env.match_id[:80]!r}, not {match_id[:80]!r}")
        if env.game_id and env.game_id != created.game_id:
            raise Refused("bad_export", f"{where} names game {env.game_id[:80]!r}, not {created.game_id!r}")
        stamp = env.timestamp
        if not (0 <= stamp.seconds <= MAX_SECONDS and 0 <= stamp.nanos <= 999_999_999):
            raise Refused("bad_export", f"{where} has no valid time ({stamp.seconds}s {stamp.nanos}ns)")
        if not -1 <= env.seat < seats:
            raise Refused("bad_export", f"{where} names acting seat {env.seat} at a {seats}-seat table")
        if env.visibility.kind not in _KINDS or any(not 0 <= s < seats for s in env.visibility.seats):
            raise Refused("bad_export", f"{where} has an unknown visibility {env.visibility}".rstrip())
        if not _storable(env.command_id, 128):
            raise Refused("bad_export", f"{where}: a command id is at most 128 characters, without NUL")
        if seq == 1:
            continue
        if env.type == MATCH_CREATED:
            raise Refused("bad_export", f"{where} is a second match_created")
        if env.type == MATCH_CANCELLED:
            _check_cancel(env, where, last=seq == len(envelopes))
            continue
        if env.type in SEAT_CHANGES:
            problem = seat_change_problem(env, seats, bots, away)
            if problem:
                raise Refused("bad_export", f"{where}: {problem}")
            fold_away(away, env)
            continue
        if env.payload_type and env.payload_type != event_type.DESCRIPTOR.full_name:
            raise Refused("bad_export", f"{where} holds a {env.payload_type[:80]}, not a "
                                        f"{event_type.DESCRIPTOR.full_name}")
        try:
            event = event_type.FromString(env.payload)
        except DecodeError as exc:
            raise Refused("bad_export", f"{where} ({env.type[:40]}): the payload does not parse: {exc}") from None
        kind = event.WhichOneof("kind") or ""
        if not kind or kind != env.type:
            raise Refused("bad_export", f"{where} says {env.type[:40]!r} but holds {kind or 'no event'!r}")
        if env.command:
            try:
                if command_type is not None:
                    command_type.FromString(env.command)
            except DecodeError as exc:
                raise Refused("bad_export", f"{where}: the recorded command does not parse: {exc}") from None


def _check_cancel(env: EventEnvelope, where: str, *, last: bool) -> None:
    """A `match_cancelled` ends the match: the last event, the server's, with its own payload."""
    if not last:
        raise Refused("bad_export", f"{where} is a match_cancelled, and events follow it")
    if env.command or (env.payload_type and env.payload_type != envelope_pb2.MatchCancelled.DESCRIPTOR.full_name):
        raise Refused("bad_export", f"{where}: a match_cancelled holds a MatchCancelled and no command")
    try:
        envelope_pb2.MatchCancelled.FromString(env.payload)
    except DecodeError as exc:
        raise Refused("bad_export", f"{where}: the match_cancelled payload does not parse: {exc}") from None


def _check_fold(registry: Registry, envelopes: Sequence[EventEnvelope]) -> None:
    """Fold the whole match as every reader will (MatchState), read its result, and show every
    state as the replay service does (each seat's view and a spectator's, the whole state as
    text): a match stored is one every reader can show, at any event."""
    match: MatchState | None = None
    folded = False
    try:
        match = MatchState.start(registry, envelopes[0])
        engine = match.engine
        seats = range(match.seats)
        for env in envelopes[1:]:
            if env.type in SEAT_CHANGES and match.state is not None and engine.result(match.state) is not None:
                raise Refused("bad_export", f"event {env.seq}: a {env.type} follows the match's end (its result)")
            match.apply([env])
            if match.state is not None:
                for seat in (*seats, None):
                    engine.view(match.state, seat)
                engine.render_state(match.state)
        folded = True
        match.result()
    except Refused:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever the engine raises, the match is unreadable here
        at = " reading its result" if folded else "" if match is None else f" at seq {match.version + 1}"
        raise Refused("unreadable_match", f"today's engine cannot fold this match{at}: {type(exc).__name__}: "
                                          f"{exc}"[:500], precondition=True) from None
