"""decide(state, seat, command, rng): one function per command kind, plus a dispatch dict.

After a command is applied the turn runs on by itself (`drive`) until the next decision or the end:
Advance Time, the empty-hand token, Refresh and the next turn need no decision (GR-D01).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from famiglia.engine import Rng, RuleViolation
from famiglia.engine.errors import MalformedCommand, NotYourTurn
from famiglia.grifters.v1 import grifters_pb2 as pb

from . import events as ev
from .data import JOBS_BY_ID, SKILL_OF
from .effects import EFFECTS, Effect, reward
from .flow import CHOICE_RULE, awaiting_play, choice_options
from .resolve import ROUND_LIMIT, START, Ctx, GameOver
from .state import (
    ABDUCT,
    COPY,
    HIT,
    JOB_SWAP,
    KEEP,
    KIDNAP,
    NIGHT,
    OPPONENT,
    PARTNER,
    SECOND,
    State,
    in_hand_order,
)


def decide(state: State, seat: int, command: pb.Command, rng: Rng) -> list[pb.Event]:
    kind = command.WhichOneof("kind")
    if kind is None or kind not in _DECIDERS:
        raise MalformedCommand("GR-D02", "not a Grifters command")
    if state.over:
        raise RuleViolation("GR-E02", "the game is over")
    if seat != state.active:
        raise NotYourTurn("GR-D01", f"only the active player (seat {state.active}) decides")
    ctx = Ctx(state, rng)
    try:
        _DECIDERS[kind](ctx, getattr(command, kind))
        drive(ctx)
        if ctx.presets:
            raise RuleViolation("GR-D02", f"this caper asked no {', '.join(sorted(ctx.presets))} choice")
    except GameOver:
        pass
    ctx.remember()
    return ctx.events


def _effect(code: str) -> Effect:
    return reward if code == "reward" else EFFECTS[code]


def drive(ctx: Ctx) -> None:
    """Run the turn on until a decision is open or the game is over (GR-R02..GR-R10, GR-E08)."""
    cfg = ctx.state.config
    while True:
        s = ctx.state
        if s.over or s.choice:
            return
        if s.caper is not None:
            _effect(s.caper.code)(ctx, s.caper, START)
            continue
        seat = s.active
        player = s.players[seat]
        if not s.played:
            if player.hand:
                return  # the play decision (GR-D02)
            # GR-R07, GR-R08, GR-X06: the engine places the empty-hand token.
            ctx.emit(ev.isk_token_placed(seat, placed=cfg.empty_hand_token and player.stash > 0))
            continue
        ctx.emit(ev.cards_refreshed(seat, player.refresh))  # Phase 3 (GR-R10)
        nxt = (seat + 1) % s.seats
        round_ = s.round + (1 if nxt == s.first_player else 0)
        if round_ > cfg.max_rounds:
            ctx.end(ROUND_LIMIT)  # GR-E08
        ctx.begin_turn(nxt, round_, s.turn + 1)


# -- the play decision (GR-D02) ------------------------------------------------------------------------------
def _require_play(ctx: Ctx) -> None:
    if not awaiting_play(ctx.state):
        if ctx.state.choice:
            raise RuleViolation("GR-D07", f"a {ctx.state.choice} choice is open, not the play decision")
        raise RuleViolation("GR-D01", "no play decision is open")


def _pull_caper(ctx: Ctx, cmd: pb.PullCaper) -> None:
    """GR-C01, GR-C03: the card leaves the hand and its text resolves."""
    _require_play(ctx)
    if cmd.card not in ctx.state.players[ctx.seat].hand:
        raise RuleViolation("GR-C01", f"{cmd.card} is not in your hand")
    ctx.presets = _presets(cmd)
    ctx.emit(ev.caper_pulled(ctx.seat, cmd.card, use_defaults=cmd.use_defaults))


def _presets(cmd: pb.PullCaper) -> dict[str, Any]:
    """The advance answers a PullCaper carries, by resolve.PRESET_KEY (GR-D03)."""
    out: dict[str, Any] = {}
    if cmd.HasField("opponent"):
        out["opponent"] = cmd.opponent
    if cmd.HasField("target"):
        out["target"] = (cmd.target.opponent, cmd.target.card)
    if cmd.partner:
        out["partner"] = cmd.partner
    if cmd.HasField("night"):
        out["night"] = cmd.night
    if cmd.HasField("swap_jobs"):
        out["job_swap"] = (cmd.swap_jobs.own_job, cmd.swap_jobs.opponent, cmd.swap_jobs.their_job)
    elif cmd.decline_job_swap:
        out["job_swap"] = None
    if cmd.copy:
        out["copy"] = cmd.copy
    if cmd.second_caper:
        out["second_caper"] = cmd.second_caper
    elif cmd.decline_second_caper:
        out["second_caper"] = None
    return out


#: GR-J03: each Job's icons as a sorted tuple of skills (a multiset in canonical form)
_ICONS: dict[str, tuple[str, ...]] = {
    j.id: tuple(sorted(skill for skill, n in j.skills for _ in range(n))) for j in JOBS_BY_ID.values()
}


def team_matches(job: str, team: list[str] | tuple[str, ...]) -> bool:
    """GR-J03, GR-J04: the Team's skills equal the Job's icons as multisets."""
    return tuple(sorted([SKILL_OF[c] for c in team])) == _ICONS[job]


def _complete_job(ctx: Ctx, cmd: pb.CompleteJob) -> None:
    """GR-J01, GR-J03, GR-J06, GR-J11, GR-X19."""
    _require_play(ctx)
    s = ctx.state
    if cmd.job not in JOBS_BY_ID:
        raise RuleViolation("GR-J02", f"no Job {cmd.job}")
    if cmd.job not in s.available_jobs():
        raise RuleViolation("GR-J01", f"{cmd.job} is not on top of a stack in play")
    team = list(cmd.team)
    hand = s.players[ctx.seat].hand
    if len(set(team)) != len(team) or any(c not in hand for c in team):
        raise RuleViolation("GR-J11", "the Team must be distinct cards from your hand")
    if not team_matches(cmd.job, team):
        raise RuleViolation("GR-J03", f"the Team's skills do not match {cmd.job} exactly")
    ctx.emit(ev.job_completed(ctx.seat, cmd.job, in_hand_order(team)))


# -- follow-up choices (GR-D03) --------------------------------------------------------------------------
def _answer(ctx: Ctx, choice: str, answer: Any, optional_decline: bool = False) -> None:
    s = ctx.state
    if s.choice != choice:
        raise RuleViolation("GR-D07", f"no {choice} choice is open" + (f" ({s.choice} is)" if s.choice else ""))
    if not optional_decline and answer not in choice_options(s, choice):
        raise RuleViolation(CHOICE_RULE[choice], f"{answer!r} is not a legal {choice} choice")
    assert s.caper is not None
    _effect(s.caper.code)(ctx, s.caper, answer)


def _target(ctx: Ctx, choice: str, opponent: int, card: str) -> tuple[int, int, str]:
    for option in choice_options(ctx.state, choice) if ctx.state.choice == choice else ():
        if option[0] == opponent and option[2] == card:
            return option
    return (opponent, 0, card)  # refused by _answer


def _keep_card(ctx: Ctx, cmd: pb.KeepCard) -> None:
    _answer(ctx, KEEP, cmd.card)


def _rob_opponent(ctx: Ctx, cmd: pb.RobOpponent) -> None:
    _answer(ctx, OPPONENT, cmd.opponent)


def _abduct(ctx: Ctx, cmd: pb.AbductSpecialist) -> None:
    _answer(ctx, ABDUCT, _target(ctx, ABDUCT, cmd.opponent, cmd.card))


def _kidnap(ctx: Ctx, cmd: pb.KidnapSpecialist) -> None:
    _answer(ctx, KIDNAP, _target(ctx, KIDNAP, cmd.opponent, cmd.card))


def _hit(ctx: Ctx, cmd: pb.HitSpecialist) -> None:
    _answer(ctx, HIT, _target(ctx, HIT, cmd.opponent, cmd.card))


def _swap_jobs(ctx: Ctx, cmd: pb.SwapJobs) -> None:
    _answer(ctx, JOB_SWAP, (cmd.own_job, cmd.opponent, cmd.their_job))


def _decline_job_swap(ctx: Ctx, cmd: pb.DeclineJobSwap) -> None:
    _answer(ctx, JOB_SWAP, None, optional_decline=True)


def _return_night(ctx: Ctx, cmd: pb.ReturnNight) -> None:
    _answer(ctx, NIGHT, cmd.night)


def _choose_partner(ctx: Ctx, cmd: pb.ChoosePartner) -> None:
    _answer(ctx, PARTNER, cmd.card)


def _copy_caper(ctx: Ctx, cmd: pb.CopyCaper) -> None:
    _answer(ctx, COPY, cmd.card)


def _pull_second_caper(ctx: Ctx, cmd: pb.PullSecondCaper) -> None:
    _answer(ctx, SECOND, cmd.card)


def _decline_second_caper(ctx: Ctx, cmd: pb.DeclineSecondCaper) -> None:
    _answer(ctx, SECOND, None, optional_decline=True)


_DECIDERS: dict[str, Callable[[Ctx, Any], None]] = {
    "pull_caper": _pull_caper,
    "complete_job": _complete_job,
    "keep_card": _keep_card,
    "rob_opponent": _rob_opponent,
    "abduct_specialist": _abduct,
    "kidnap_specialist": _kidnap,
    "hit_specialist": _hit,
    "swap_jobs": _swap_jobs,
    "decline_job_swap": _decline_job_swap,
    "return_night": _return_night,
    "choose_partner": _choose_partner,
    "copy_caper": _copy_caper,
    "pull_second_caper": _pull_second_caper,
    "decline_second_caper": _decline_second_caper,
}
