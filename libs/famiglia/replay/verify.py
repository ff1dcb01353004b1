"""Deterministic verification: re-run a recorded match through today's engine.

`decide` is deterministic given the state, the seat, the command and
`Rng.derive(seed, version_before)`, and `setup` given the config and the seed.
So from the recorded setup (seats, options, seed) and the recorded commands,
today's engine must produce exactly the recorded events: the same payload
bytes (deterministic serialization), the same type and the same visibility,
seq by seq. The first place where it does not is reported, rendered both ways,
and nothing after it is checked (the states have parted).

A file that disagrees with itself (header vs. the stored MatchCreated, the
command list vs. the envelopes, gaps in seq) fails as `format` at that seq.

The server's own events mid-match re-run nothing: a `match_cancelled` (the last event) and
the seat changes (`seat_left`, `seat_returned`: who plays a seat), each checked against the
rules it is written by (`seat_changes.py`), a failure as `format` at its seq.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError, Message

from famiglia.engine import Engine, MatchConfig, Rng, RuleViolation, VisibilityKind
from famiglia.engine.registry import Registry, UnknownGame
from famiglia.eventstore.envelopes import (
    MATCH_CANCELLED,
    MATCH_CREATED,
    SEAT_CHANGES,
    open_match_cancelled,
    open_match_created,
    visibility_proto,
)
from famiglia.v1.envelope_pb2 import EventEnvelope, MatchCreated
from famiglia.v1.replay_service_pb2 import Divergence, MatchExport, VerifyMatchResponse

from .export import recorded_commands, setup_last_seq
from .seat_changes import fold_away, seat_change_problem


@dataclass
class Report:
    """The outcome; `divergence` is None exactly when `ok`."""

    match_id: str
    game_id: str
    events_checked: int = 0
    commands_checked: int = 0
    divergence: Divergence | None = None

    @property
    def ok(self) -> bool:
        return self.divergence is None

    def to_proto(self) -> VerifyMatchResponse:
        out = VerifyMatchResponse(ok=self.ok, match_id=self.match_id, game_id=self.game_id,
                                  events_checked=self.events_checked, commands_checked=self.commands_checked)
        if self.divergence is not None:
            out.divergence.CopyFrom(self.divergence)
        return out

    def describe(self) -> str:
        """A few lines for a terminal."""
        head = (f"match {self.match_id} ({self.game_id}): {self.events_checked} events, "
                f"{self.commands_checked} commands re-run")
        d = self.divergence
        if d is None:
            return f"OK  {head}; every event reproduced exactly"
        lines = [f"FAIL {head}", f"  first divergence at seq {d.seq}: {d.reason}"]
        if d.command:
            lines.append(f"  command  : seat {d.seat} {d.command}")
        lines.append(f"  expected : {d.expected or '(nothing)'}")
        lines.append(f"  got      : {d.got or '(nothing)'}")
        if d.detail:
            lines.append(f"  detail   : {d.detail}")
        return "\n".join(lines)


class _Diverged(Exception):
    def __init__(self, divergence: Divergence) -> None:
        super().__init__(divergence.reason)
        self.divergence = divergence


def verify_export(registry: Registry, export: MatchExport) -> Report:
    """Check a whole export file (header and command list included)."""
    report = Report(export.match_id, export.game_id)
    try:
        _check_header(export)
        _check_type_names(registry, export)
        _check_command_list(export)
    except _Diverged as exc:
        report.divergence = exc.divergence
        return report
    return verify_envelopes(registry, list(export.events), report)


def verify_envelopes(registry: Registry, envelopes: Sequence[EventEnvelope], report: Report | None = None) -> Report:
    """Re-run setup and every recorded command; compare with `envelopes` (the whole match)."""
    match_id = envelopes[0].match_id if envelopes else ""
    report = report or Report(match_id, "")
    try:
        _verify(registry, envelopes, report)
    except _Diverged as exc:
        report.divergence = exc.divergence
    return report


# -- the re-run ----------------------------------------------------------------------------
def _verify(registry: Registry, envelopes: Sequence[EventEnvelope], report: Report) -> None:
    if not envelopes or envelopes[0].type != MATCH_CREATED or envelopes[0].seq != 1:
        raise _Diverged(Divergence(seq=1, reason="format", detail="the match does not start with match_created"))
    for i, env in enumerate(envelopes, start=1):
        if env.seq != i or env.match_id != envelopes[0].match_id:
            raise _Diverged(Divergence(seq=i, reason="format",
                                       detail=f"envelope {i} is seq {env.seq} of match {env.match_id}"))
    created = _created(envelopes[0])
    report.game_id = created.game_id
    try:
        engine = registry.get(created.game_id)
    except UnknownGame:
        raise _Diverged(Divergence(seq=1, reason="format", detail=f"no engine for game {created.game_id!r}")) from None
    _check_envelope_fields(envelopes, created.game_id)
    report.events_checked = 1

    info = engine.info
    if not info.min_players <= created.seats <= info.max_players:
        raise _Diverged(Divergence(seq=2, reason="setup", detail=f"{created.game_id} seats {info.min_players}.."
                                                                 f"{info.max_players} players, not {created.seats}"))
    try:
        setup = engine.setup(MatchConfig(seats=created.seats, options=dict(created.options)), int(created.seed))
    except RuleViolation as exc:
        raise _Diverged(Divergence(seq=2, reason="setup", detail=f"setup refused: {exc.code} {exc.message}")) from None
    except Exception as exc:  # noqa: BLE001 - an option value the game cannot read (ValueError, OverflowError...)
        raise _Diverged(Divergence(seq=2, reason="setup",
                                   detail=f"setup fails on these options: {type(exc).__name__}: {exc}"[:500])) from None
    recorded_setup = list(envelopes[1:setup_last_seq(envelopes)])
    state = _compare_all(engine, None, recorded_setup, setup, 2, report, reason_missing="setup")
    seq = 1 + len(setup)

    padding = info.padding_event()  # written by the server beside held events, never decided
    bots = {i.seat for i in created.seat_info if i.bot}
    away: dict[int, str] = {}
    """seat -> the reason its player left it, while the bots play it"""
    while seq < len(envelopes):
        first = envelopes[seq]  # seq + 1
        if first.type in SEAT_CHANGES:  # who plays a seat: the server's, nothing to re-run
            problem = seat_change_problem(first, int(created.seats), bots, away)
            if not problem and state is not None and _over(engine, state):  # LeaveMatch refuses `match_over`
                problem = f"a {first.type} follows the match's end (its result)"
            if problem:
                raise _Diverged(Divergence(seq=first.seq, reason="format", seat=first.seat, detail=problem))
            fold_away(away, first)
            report.events_checked += 1
            seq += 1
            continue
        if first.type == MATCH_CANCELLED:
            _check_cancel(envelopes, first)  # an operator's, not a command: nothing to re-run
            if state is not None and _over(engine, state):  # CancelMatch refuses `match_over`
                raise _Diverged(Divergence(seq=first.seq, reason="format",
                                           detail="a cancel follows the match's end (its result)"))
            report.events_checked += 1
            seq += 1
            continue
        if padding is not None and not first.command and first.type == info.held_padding:
            state = _compare_all(engine, state, [first], [padding], first.seq, report)
            seq += 1
            continue
        if not first.command:
            raise _Diverged(Divergence(
                seq=first.seq, reason="missing", expected=_render_recorded(engine, first),
                detail="no recorded command for this event (a match from before command recording, "
                       "or an event no command caused)"))
        group = [first]
        for env in envelopes[seq + 1:]:
            if env.command or env.command_id != first.command_id or env.type in SEAT_CHANGES:
                break
            group.append(env)
        try:
            command = engine.info.command_type.FromString(first.command)  # type: ignore[union-attr]
        except DecodeError as exc:
            raise _Diverged(Divergence(seq=first.seq, reason="format", seat=first.seat,
                                       detail=f"the recorded command does not parse: {exc}")) from None
        rendered = _safe(engine.render_command, command)
        try:
            produced = engine.decide(state, first.seat, command, Rng.derive(int(created.seed), first.seq - 1))
        except RuleViolation as exc:
            raise _Diverged(Divergence(seq=first.seq, reason="refused", command=rendered, seat=first.seat,
                                       expected=_render_recorded(engine, first),
                                       detail=f"today's engine refuses it: {exc.code} {exc.message}")) from None
        except Exception as exc:  # noqa: BLE001 - a tampered command (a seat out of range...) must not crash us
            raise _Diverged(Divergence(seq=first.seq, reason="refused", command=rendered, seat=first.seat,
                                       expected=_render_recorded(engine, first),
                                       detail=f"today's engine fails on it: {type(exc).__name__}: {exc}"[:500])
                            ) from None
        # A command's events run until the next recorded command; more produced ones show as missing.
        state = _compare_all(engine, state, group, produced, first.seq, report, command=rendered, seat=first.seat)
        report.commands_checked += 1
        seq += len(group)


def _check_envelope_fields(envelopes: Sequence[EventEnvelope], game_id: str) -> None:
    """The envelope fields no re-run reproduces but every reader relies on: each event names
    the match's game (or none), and `match_created` is the server's, secret, with no command."""
    first = envelopes[0]
    if (first.seat != -1 or first.command_id or first.command
            or first.visibility.kind != VisibilityKind.SERVER or first.visibility.seats
            or first.payload_type not in ("", MatchCreated.DESCRIPTOR.full_name)):
        raise _Diverged(Divergence(seq=1, reason="format",
                                   detail="match_created is the server's event (seat -1, no command, "
                                          "server-only visibility, a famiglia.v1.MatchCreated)"))
    for env in envelopes:
        if env.game_id and env.game_id != game_id:
            raise _Diverged(Divergence(seq=env.seq, reason="format",
                                       detail=f"event {env.seq} names game {env.game_id[:80]!r}, not {game_id!r}"))


def _check_cancel(envelopes: Sequence[EventEnvelope], env: EventEnvelope) -> None:
    """A `match_cancelled` (GameService.CancelMatch) ends the match: the server's, public, its
    payload readable, and the last event. The events before it reproduce on their own."""
    problem = ""
    if env.seq != len(envelopes):
        problem = "events follow the match's cancel"
    elif env.seat != -1 or env.command or env.visibility.kind != VisibilityKind.PUBLIC:
        problem = "a cancel is the server's public event, with no command"
    else:
        try:
            open_match_cancelled(env)
        except DecodeError as exc:
            problem = f"the match_cancelled payload does not parse: {exc}"
    if problem:
        raise _Diverged(Divergence(seq=env.seq, reason="format", detail=problem))


def _compare_all(engine: Engine, state: Any, recorded: Sequence[EventEnvelope], produced: Sequence[Message],
                 first_seq: int, report: Report, *, reason_missing: str = "missing", command: str = "",
                 seat: int = -1) -> Any:
    """Compare one batch event by event and fold it; raise at the first difference."""
    for i in range(max(len(recorded), len(produced))):
        seq = first_seq + i
        if i >= len(produced):
            raise _Diverged(Divergence(seq=seq, reason="extra", expected=_render_recorded(engine, recorded[i]),
                                       command=command, seat=seat,
                                       detail="the record has an event today's engine does not produce"))
        if i >= len(recorded):
            raise _Diverged(Divergence(seq=seq, reason=reason_missing, got=_safe(engine.render_event, produced[i]),
                                       command=command, seat=seat,
                                       detail="today's engine produces an event the record does not have"))
        env, event = recorded[i], produced[i]
        reason = "seat" if env.seat != seat or (seat < 0 and env.command_id) else _difference(engine, env, event)
        if reason:
            raise _Diverged(Divergence(
                seq=seq, reason=reason, expected=_render_recorded(engine, env),
                got=_describe(engine, event), command=command, seat=seat,
                detail=_detail(engine, env, event, reason, seat)))
        state = engine.evolve(state, event)
        report.events_checked += 1
    return state


def _difference(engine: Engine, env: EventEnvelope, event: Message) -> str:
    if env.type != (event.WhichOneof("kind") or ""):
        return "type"
    if env.payload != event.SerializeToString(deterministic=True):
        return "payload"
    if env.payload_type and env.payload_type != event.DESCRIPTOR.full_name:
        return "type"
    if env.visibility != visibility_proto(engine.visibility(event)):
        return "visibility"
    return ""


def _detail(engine: Engine, env: EventEnvelope, event: Message, reason: str, seat: int = -1) -> str:
    if reason == "seat":
        return (f"recorded as seat {env.seat}'s (command {env.command_id!r}), the event of "
                + (f"seat {seat}'s command" if seat >= 0 else "no command (the server's)"))
    if reason == "visibility":
        got = engine.visibility(event)
        return (f"visibility recorded {_kind_name(env.visibility.kind)}{sorted(env.visibility.seats)}, "
                f"got {_kind_name(got.kind)}{sorted(got.seats)}")
    if reason == "payload":
        return f"payload bytes differ (recorded {env.payload.hex()[:80]}, got " \
               f"{event.SerializeToString(deterministic=True).hex()[:80]})"
    return f"type recorded {env.type!r}, got {event.WhichOneof('kind')!r}"


def _kind_name(kind: int) -> str:
    """A visibility kind's name, or its number when this server knows no such kind (a file's)."""
    try:
        return VisibilityKind(kind or VisibilityKind.SERVER).name
    except ValueError:
        return f"kind {int(kind)}"


def _render_recorded(engine: Engine, env: EventEnvelope) -> str:
    try:
        event = engine.info.event_type.FromString(env.payload)  # type: ignore[union-attr]
    except DecodeError:
        return f"{env.type} <undecodable payload {env.payload.hex()[:40]}>"
    return _describe(engine, event)


def _describe(engine: Engine, event: Message) -> str:
    return _safe(engine.render_event, event)


def _over(engine: Any, state: Any) -> bool:
    """Whether the fold has a result (a tampered fold that breaks `result` is not over)."""
    try:
        return engine.result(state) is not None
    except Exception:  # noqa: BLE001 - the divergence, if any, is found by the events themselves
        return False


def _safe(render: Any, message: Message) -> str:
    """Render, or fall back to the proto text: a tampered event may break a renderer."""
    try:
        return str(render(message))
    except Exception:  # noqa: BLE001 - rendering must not hide the divergence
        return str(message).replace("\n", " ")


def _created(first: EventEnvelope) -> MatchCreated:
    try:
        return open_match_created(first)
    except DecodeError as exc:
        raise _Diverged(Divergence(seq=1, reason="format", detail=f"the match_created payload does not parse: {exc}")
                        ) from None


# -- the file's own consistency -----------------------------------------------------------------
def _check_header(export: MatchExport) -> None:
    first = export.events[0]
    if first.type != MATCH_CREATED:
        raise _Diverged(Divergence(seq=first.seq, reason="format", detail="the first event is not match_created"))
    created = _created(first)
    header = (export.game_id, export.seats, export.seed, dict(export.options), export.setup_last_seq)
    stored = (created.game_id, created.seats, created.seed, dict(created.options), setup_last_seq(export.events))
    if header != stored or export.setup != created:
        raise _Diverged(Divergence(seq=1, reason="format", expected=str(stored), got=str(header),
                                   detail="the file's header disagrees with its match_created event "
                                          "(or its setup_last_seq with its events)"))


def _check_type_names(registry: Registry, export: MatchExport) -> None:
    """The proto names the file gives for its game's Event and Command (empty: a writer without
    the game) are the game's: a reader decodes by them."""
    try:
        engine = registry.get(export.setup.game_id)
    except UnknownGame:
        return  # reported with the events
    info = engine.info
    event_name = info.event_type.DESCRIPTOR.full_name if info.event_type is not None else ""
    command_name = info.command_type.DESCRIPTOR.full_name if info.command_type is not None else ""
    # (A recorded command's own `command_type`, like its `text`, is a label for people reading the
    # file: the command's bytes are decoded as the file's `command_type`, and an import's export
    # names the real one.)
    named = [(1, "event_type", export.event_type, event_name), (1, "command_type", export.command_type, command_name)]
    for seq, what, name, want in named:
        if name and name != want:
            raise _Diverged(Divergence(seq=seq, reason="format", expected=want, got=name,
                                       detail=f"the file's {what} is not {_game_of(export)}'s"))


def _game_of(export: MatchExport) -> str:
    return export.setup.game_id[:80]


def _check_command_list(export: MatchExport) -> None:
    from_envelopes = recorded_commands(list(export.events))
    listed = list(export.commands)
    for i in range(max(len(listed), len(from_envelopes))):
        a = listed[i] if i < len(listed) else None
        b = from_envelopes[i] if i < len(from_envelopes) else None
        same = a is not None and b is not None and (a.first_seq, a.last_seq, a.seat, a.command_id, a.command) == (
            b.first_seq, b.last_seq, b.seat, b.command_id, b.command)
        if not same:
            seq = (b or a).first_seq  # type: ignore[union-attr]
            raise _Diverged(Divergence(seq=seq, reason="format",
                                       detail="the file's command list disagrees with the commands "
                                              "recorded on its events"))
