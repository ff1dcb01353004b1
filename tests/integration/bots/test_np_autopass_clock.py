"""Nothing Personal's standing auto-pass over the real path (NP-D7, NP-H9).

A human seat that set it is asked in every card window like any other holder of cards, on a clock
that runs out at once (TIMEOUTS["auto_pass"]); the dispatcher's `clock` task and a real Celery
worker answer pass for it (`run_clock` -> `engine.timeout_command`), with no command from its
client, and the match goes on. What the other seats and a spectator receive (events, GetView) must
not tell that the seat had auto-pass on: the same match with the seat answering pass by hand (its
auto-pass set for reroll windows only, so the same one private event is stored) looks exactly the
same to them. The matches are human-only and driven here with legal commands, so every version is
the same from run to run; only the auto-pass clock is short enough to fire within the test.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pytest

from famiglia.client.game_client import SeatClient
from famiglia.nothing_personal.v1 import nothing_personal_pb2 as np
from famiglia.rules.nothing_personal.data import TIMEOUTS
from famiglia.v1 import game_service_pb2 as gs

from .conftest import BotsStack

pytestmark = [pytest.mark.redis, pytest.mark.xdist_group("bots")]

GAME = "nothing_personal"
SEATS = 3
SEED = 1          # the first card window opens 13 commands in (the Crew, before scoring position 9)
AUTO = 0          # the seat with the standing auto-pass
WINDOWS = 2       # card windows to go through
# "At once" against the seat's own card-window clock (20 s): half of that tells the two apart and
# leaves a loaded 2-core machine (a Celery worker process, the dispatcher's clock) room to answer.
ANSWER_WITHIN = TIMEOUTS["card_window"] / 2
PASS = np.Command(**{"pass": np.Pass()})


def _view(seat: SeatClient) -> tuple[gs.GetViewResponse, np.View]:
    reply = seat.view()
    return reply, np.View.FromString(reply.view.value)


def _worker_log(stack: BotsStack) -> str:
    return (stack.tmp / "worker.log").read_text()[-3000:]


def _step(clients: list[SeatClient], skip: int | None = None) -> gs.SubmitCommandResponse:
    """One legal command (pass where it is legal) for the first seat the match waits for."""
    for seat, c in enumerate(clients):
        reply = c.view()
        if seat == skip or seat not in {p.seat for p in reply.to_act}:
            continue
        legal = [np.Command.FromString(a.value) for a in c.legal_commands().commands]
        command = PASS if any(x.WhichOneof("kind") == "pass" for x in legal) else legal[0]
        return c.submit(command, command_id=f"t{reply.version}-{seat}", expected_version=reply.version)
    pytest.fail("the match waits for nobody here")


def _set_auto_pass(seat: SeatClient, version: int, *, cards: bool) -> int:
    """NP-D7: cards=True for card windows; else reroll windows only (the same one private event)."""
    setting = np.SetAutoPass(cards=True) if cards else np.SetAutoPass(rerolls=True)
    return seat.submit(np.Command(set_auto_pass=setting), command_id="autopass", expected_version=version).version


@dataclass
class Played:
    match_id: str
    tokens: list[str]
    auto_set_version: int = 0
    window_versions: list[int] = field(default_factory=list)   # the version each window opened at
    where: list[tuple[str, str, int]] = field(default_factory=list)   # (phase, stage, position) of each
    answer_seconds: list[float] = field(default_factory=list)  # how long AUTO's answer took to come
    others_views: list[list[tuple]] = field(default_factory=list)  # per window, once AUTO answered
    end_version: int = 0                                        # right after the last window closed


def _play(stack: BotsStack, *, auto: bool) -> Played:
    """Drive a human-only match; AUTO sets its auto-pass in round 1's Commission and, in every card
    window, answers first: by its clock when `auto` (the test sends it nothing then), else by hand.
    The other seats then pass, and the window closes."""
    handle = stack.client.create_match(GAME, SEATS, seed=SEED, seat_info=[])
    clients = [stack.client.seat(handle.match_id, token) for token in handle.seat_tokens]
    spectator = stack.client.spectator(handle.match_id)
    played = Played(handle.match_id, list(handle.seat_tokens))
    closed = 0
    for _ in range(200):
        if closed == WINDOWS:
            return played
        own, mine = _view(clients[AUTO])
        if not played.auto_set_version and mine.round >= 1 and mine.phase == "commission":
            played.auto_set_version = _set_auto_pass(clients[AUTO], own.version, cards=auto)
            continue
        if mine.window == "card" and mine.window_asks_me and not mine.window_answered_by_me:
            # NP-D7: a seat holding cards is asked (public facts only), auto-pass or not ...
            played.window_versions.append(own.version)
            played.where.append((mine.phase, mine.stage, mine.position))
            started = time.monotonic()
            if auto:   # ... and with it on, the clock answers for it, at once
                rows = [p for p in own.to_act if p.seat == AUTO]
                assert not rows or rows[0].timeout_seconds == pytest.approx(TIMEOUTS["auto_pass"])
                while not mine.window_answered_by_me:
                    assert time.monotonic() - started < ANSWER_WITHIN, (
                        f"nothing answered for the auto-pass seat within {ANSWER_WITHIN}s at version "
                        f"{own.version}\n{_worker_log(stack)}")
                    time.sleep(0.02)
                    own, mine = _view(clients[AUTO])
            else:
                clients[AUTO].submit(PASS, command_id=f"t{own.version}-{AUTO}", expected_version=own.version)
                own, mine = _view(clients[AUTO])
            played.answer_seconds.append(time.monotonic() - started)
            assert mine.my_answer == PASS
            # What the others and a spectator are shown now, with AUTO's answer in and theirs not.
            snapshot = []
            for c in [*clients[:AUTO], *clients[AUTO + 1:], spectator]:
                reply = c.view()
                assert AUTO not in {p.seat for p in reply.to_act}   # NP-H9: its row is its own
                snapshot.append((reply.version, [(p.seat, p.kind, p.label, p.timeout_seconds) for p in reply.to_act],
                                 reply.view.value))
            played.others_views.append(snapshot)
            continue
        done = _step(clients, skip=AUTO if auto and played.window_versions else None)
        if any(e.type == "window_closed" for e in done.events):
            closed += 1
            played.end_version = done.version
    raise AssertionError(f"{WINDOWS} card windows not reached and closed in 200 commands")


def _seen(stack: BotsStack, match_id: str, token: str | None, until: int) -> list[tuple]:
    """All one viewer receives up to version `until`, less event ids and times."""
    return [(r.event.seq, r.event.type, r.event.seat, r.event.command_id, r.event.event.value, r.event.text)
            for r in stack.client.seat(match_id, token).stream(until_now=True) if 0 < r.event.seq <= until]


def test_np_d7_h9_a_standing_auto_pass_is_answered_by_the_clock_and_shown_to_nobody_else(
        bots_stack: BotsStack) -> None:
    auto = _play(bots_stack, auto=True)
    by_hand = _play(bots_stack, auto=False)

    # The clock answered each window, with pass, within moments; the match went on past it.
    assert len(auto.window_versions) == WINDOWS and auto.end_version > auto.window_versions[-1]
    assert len(set(auto.where)) == WINDOWS, auto.where   # each window at a later step of the Crew
    assert max(auto.answer_seconds) < ANSWER_WITHIN
    stored = {e.seq: e for e in bots_stack.command.store.read(auto.match_id)}
    from_auto = [e for seq, e in sorted(stored.items())
                 if e.seat == AUTO and auto.window_versions[0] < seq <= auto.end_version]
    assert [e.seq for e in from_auto] == [v + 1 for v in auto.window_versions]   # first in, once a window
    for env, version in zip(from_auto, auto.window_versions, strict=True):
        assert env.command_id == f"clock:{auto.match_id}:{version}:{AUTO}"   # the turn clock, no client
        assert env.type == "window_answered"
        answer = np.Event.FromString(env.payload).window_answered
        assert answer.seat == AUTO and answer.answer == PASS
        took = env.timestamp.ToMilliseconds() - stored[version].timestamp.ToMilliseconds()
        assert took < ANSWER_WITHIN * 1000, took   # after the event that opened the window
    # The seat itself is shown its answers.
    own = [r.event for r in bots_stack.client.seat(auto.match_id, auto.tokens[AUTO]).stream(until_now=True)
           if r.event.type == "window_answered" and r.event.seq <= auto.end_version]
    assert [(e.seq, e.seat, e.command_id) for e in own] == [
        (v + 1, AUTO, f"clock:{auto.match_id}:{v}:{AUTO}") for v in auto.window_versions]

    # No event another seat or a spectator receives tells of the auto-pass or of its answers ...
    others = [s for s in range(SEATS) if s != AUTO] + [None]
    for viewer in others:
        token = None if viewer is None else auto.tokens[viewer]
        seen = [r.event for r in bots_stack.client.seat(auto.match_id, token).stream(until_now=True)]
        kinds = [e.type for e in seen]
        assert "auto_pass_set" not in kinds
        assert kinds.count("window_opened") >= WINDOWS and kinds.count("window_closed") >= WINDOWS
        for e in seen:
            assert not e.command_id.startswith("clock:"), (viewer, e.seq, e.type)
            assert not (e.seat == AUTO and auto.window_versions[0] < e.seq <= auto.end_version), (
                viewer, e.seq, e.type)
            event = np.Event.FromString(e.event.value)
            kind = event.WhichOneof("kind")
            if kind in ("window_answered", "claim_lapsed"):
                assert getattr(event, kind).seat == viewer, (viewer, e.seq, e.type)
            if kind == "window_opened":
                assert not event.window_opened.seats, (viewer, e.seq)   # who is asked: server-only
        if viewer is not None:
            view = np.View.FromString(bots_stack.client.seat(auto.match_id, token).view().view.value)
            assert not view.autopass_cards and list(view.autopass_changes)[AUTO] == 0

    # ... and to them it is the very same match as the one where the seat passed by hand.
    assert (auto.window_versions, auto.end_version) == (by_hand.window_versions, by_hand.end_version)
    for viewer in others:
        assert _seen(bots_stack, auto.match_id, None if viewer is None else auto.tokens[viewer],
                     auto.end_version) == \
            _seen(bots_stack, by_hand.match_id, None if viewer is None else by_hand.tokens[viewer],
                  by_hand.end_version), viewer
    assert auto.others_views == by_hand.others_views


def test_np_d7_h9_an_auto_pass_that_closes_a_window_is_not_told_to_the_others(bots_stack: BotsStack) -> None:
    """The other seats answer first (the worker is down meanwhile, so the clock cannot run ahead),
    then the clock's pass is the one that closes the window. Its public consequences reach the others
    unattributed (no acting seat, no command id): they would name who the window waited for."""
    handle = bots_stack.client.create_match(GAME, SEATS, seed=SEED, seat_info=[])
    clients = [bots_stack.client.seat(handle.match_id, token) for token in handle.seat_tokens]
    auto_set = 0
    restarted = False
    try:
        for _ in range(200):
            own, mine = _view(clients[AUTO])
            if not auto_set and mine.round >= 1 and mine.phase == "commission":
                auto_set = _set_auto_pass(clients[AUTO], own.version, cards=True)
                bots_stack.kill_worker()
                continue
            if mine.window == "card":
                break
            _step(clients)
        else:
            pytest.fail("no card window in 200 commands")
        opened = own.version
        for _ in range(SEATS - 1):   # every other seat asked answers: the window waits for AUTO only
            _step(clients, skip=AUTO)
        if not all(_view(c)[1].window_answered_by_me for s, c in enumerate(clients) if s != AUTO) or \
                _view(clients[AUTO])[1].window_answered_by_me:
            pytest.fail("the window does not wait for the auto-pass seat alone")
        bots_stack.start_worker()
        restarted = True
        deadline = time.monotonic() + 60   # a worker's start (imports) on a loaded machine, then the clock
        while not any(e.type == "window_closed" and e.seq > opened for e in bots_stack.command.store.read(
                handle.match_id, after=opened)):
            if time.monotonic() > deadline:
                pytest.fail(f"the window was not closed by the clock\n{_worker_log(bots_stack)}")
            time.sleep(0.05)
    finally:
        if not restarted:
            bots_stack.start_worker()
    closing = next(e for e in bots_stack.command.store.read(handle.match_id, after=opened)
                   if e.type == "window_closed")
    if closing.seat != AUTO or not closing.command_id.startswith(f"clock:{handle.match_id}:"):
        pytest.fail(f"not closed by the auto-pass seat's clock: {closing}")
    for viewer in [s for s in range(SEATS) if s != AUTO] + [None]:
        token = None if viewer is None else handle.seat_tokens[viewer]
        for r in bots_stack.client.seat(handle.match_id, token).stream(until_now=True):
            e = r.event
            assert not (e.seq > opened and (e.seat == AUTO or e.command_id.startswith("clock:"))), (
                viewer, e.seq, e.type, e.seat, e.command_id)
