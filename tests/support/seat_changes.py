"""Random matches whose seats change hands, played through the command service's use cases, and
an audit of where a stored match's seat changes stand (README "LeaveMatch", docs/bots.md "Too
many timeouts in a row", docs/replay.md "Seats their players left"), independent of the
verification's own check (`famiglia.replay.seat_changes`): the randomized replay, projection,
race and bots suites share them."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from famiglia.clocks import is_clock_default
from famiglia.engine import pending_for
from famiglia.engine.registry import Registry
from famiglia.eventstore.envelopes import (
    MATCH_CANCELLED,
    MATCH_CREATED,
    SEAT_CHANGES,
    event_decoder,
    open_match_created,
    open_seat_change,
)
from famiglia.grpcutil.errors import AppError
from famiglia.v1.envelope_pb2 import EventEnvelope, SeatInfo, SeatLeft
from services.command.app import CommandApp
from tests.support.clocks import clocks_run_out

BOTS_IDS = ("bot:", "clock:")
"""The command ids only the bots' own token submits under: a seat's decisions and its clock's default."""


@dataclass
class SeatChanging:
    """A match played by `play_with_seat_changes`: its id, its seat tokens and what it did."""

    match_id: str
    tokens: list[str]
    leaves: int = 0
    returns: int = 0
    clocks: int = 0


def play_with_seat_changes(app: CommandApp, game_id: str, seats: int, seed: int, *,
                           options: dict[str, str] | None = None, players: Sequence[str] = (),
                           most: int = 2000) -> SeatChanging:
    """A random match to its end (or `most` steps): the seats asked play random legal commands,
    a "sleepy" seat lets its clock run out often (the default the bots submit with their own
    token, so its TIMEOUTS_TO_BOT-th in a row sends it to the bots), and at random points a
    player leaves (LeaveMatch) or takes its seat back (ReturnToMatch); a seat away is played
    by the bots' token, as the dispatcher's tasks play it. `players`: the seats' player ids
    (rated by the read models), if any."""
    info = [SeatInfo(seat=s, player_id=p) for s, p in enumerate(players)]
    created = app.create_match(game_id, seats, seed=seed, options=options or {}, seat_info=info)
    match_id, rng = created.match_id, random.Random(seed)
    played = SeatChanging(match_id, list(created.seat_tokens))
    people = [app.viewer(match_id, t) for t in created.seat_tokens]
    bots = [app.viewer(match_id, app.signer.bot_seat_token(match_id, s)) for s in range(seats)]
    sleepy = rng.randrange(seats)
    for step in range(most):
        m = app.matches.catch_up(app.matches.get(match_id))
        if m.finished:
            break
        if rng.random() < 0.06:
            seat = rng.randrange(seats)
            away = m.away.get(seat)
            try:
                if away is not None and away[0].reason == "timeouts" and rng.random() < 0.7:
                    app.return_to_match(match_id, people[seat])
                    played.returns += 1
                elif away is None or away[0].reason == "timeouts":
                    if rng.random() < 0.3:
                        app.leave_match(match_id, people[seat])
                        played.leaves += 1
            except AppError:
                pass  # a held window's seat, or the like: the audit and the verification judge the rest
            continue
        asked = sorted({p.seat for p in m.engine.pending(m.state)})
        if not asked:
            break
        seat = rng.choice(asked)
        version = m.public_version
        try:
            if seat in m.away:
                legal = app.legal_commands(match_id, bots[seat]).commands
                app.submit(match_id, bots[seat], f"bot:{match_id}:{version}:{seat}", rng.choice(legal), version,
                           omit_events=True)
            elif seat == sleepy and rng.random() < 0.7 and seat in {p.seat for p in pending_for(m.engine, m.state,
                                                                                                  seat)} \
                    and seat in m.deadlines() and (default := m.engine.timeout_command(m.state, seat)) is not None:
                with clocks_run_out(app):  # (the service takes a default only once the seat's deadline passed)
                    app.submit(match_id, bots[seat], f"clock:{match_id}:{version}:{seat}", default, version,
                               omit_events=True)
                played.clocks += 1
            else:
                legal = app.legal_commands(match_id, people[seat]).commands
                app.submit(match_id, people[seat], f"p{step}", rng.choice(legal), omit_events=True)
        except AppError as refused:
            if refused.code not in {"stale_version", "seat_away", "seat_left"}:
                raise
    return played


def seat_change_problems(registry: Registry, envelopes: Sequence[EventEnvelope], timeouts_to_bot: int = 3) -> list[str]:
    """Where a stored match's seat changes break the rules they are written by, each as a line:
    none after the result (folded here from the events) or a cancel; a seat left for good
    (`left`) once, and never taken back; a `seat_returned` only for a seat away by its clock; a
    `timeouts` seat_left only right after its seat's clock default, the TIMEOUTS_TO_BOT-th (at
    least) since the seat last played or changed hands, under that default's command id with
    `away:` before it; and while a seat is away, only the bots' command ids act for it, while its
    person plays it, no bots' decision (`bot:`) does."""
    created = open_match_created(envelopes[0])
    engine = registry.get(created.game_id)
    bot_seats = {info.seat for info in created.seat_info if info.bot}
    decode = event_decoder(engine)
    problems: list[str] = []
    away: dict[int, str] = {}
    left_for_good: set[int] = set()
    defaults: dict[int, int] = {}  # clock defaults of a seat since it last played or changed hands
    state, over = None, False
    previous: EventEnvelope | None = None
    for env in envelopes:
        where = f"seq {env.seq} ({env.type}, seat {env.seat})"
        if env.type in SEAT_CHANGES:
            change = open_seat_change(env)
            if over:
                problems.append(f"{where}: a seat change after the match's end")
            if isinstance(change, SeatLeft):
                if change.reason == "left":
                    if change.seat in left_for_good:
                        problems.append(f"{where}: a second seat_left(left) of seat {change.seat}")
                    left_for_good.add(change.seat)
                else:
                    if change.seat in away:
                        problems.append(f"{where}: seat_left(timeouts) of a seat away already")
                    clock = previous.command_id if previous is not None else ""
                    if previous is None or previous.seat != change.seat or not is_clock_default(clock) \
                            or env.command_id != f"away:{clock}"[:128]:
                        problems.append(f"{where}: seat_left(timeouts) not right after its seat's clock default")
                    if defaults.get(change.seat, 0) < timeouts_to_bot:
                        problems.append(f"{where}: seat_left(timeouts) after {defaults.get(change.seat, 0)} "
                                        f"clock defaults in a row, not {timeouts_to_bot}")
                away[change.seat] = change.reason
            else:
                if away.get(change.seat) != "timeouts":
                    problems.append(f"{where}: seat_returned of a seat {away.get(change.seat) or 'not away'}")
                away.pop(change.seat, None)
            defaults[change.seat] = 0
        elif env.type == MATCH_CANCELLED:
            over = True
        elif env.type != MATCH_CREATED:
            if env.command:  # a command's first event
                if env.seat in away and not env.command_id.startswith(BOTS_IDS):
                    problems.append(f"{where}: command {env.command_id!r} for a seat the bots play")
                if env.seat not in away and env.seat not in bot_seats and env.command_id.startswith("bot:"):
                    problems.append(f"{where}: a bots' decision {env.command_id!r} for a seat its person plays")
                if is_clock_default(env.command_id):
                    defaults[env.seat] = defaults.get(env.seat, 0) + 1
                elif env.seat >= 0:
                    defaults[env.seat] = 0
            state = engine.evolve(state, decode(env.payload))
            over = over or engine.result(state) is not None
        previous = env
    return problems
