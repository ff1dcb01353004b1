"""Command constructors, `legal_commands`, `pending` and `timeout_command` over the decision table."""

from __future__ import annotations

from functools import cache, lru_cache
from itertools import chain, combinations, islice, product
from typing import Any

from famiglia.engine import DecisionKind, Draws, Pending, Sampled, draw_in_order
from famiglia.grifters.v1 import grifters_pb2 as pb

from .data import BRAIN, BRAWN, JOBS_BY_ID, SKILL_OF, SPEED
from .flow import PLAY_DECISION, choice_options, default_answer, open_decision, timeout_seconds
from .sampler import draw_teams, team_count
from .state import (
    ABDUCT,
    COPY,
    HIT,
    JOB_SWAP,
    KEEP,
    KIDNAP,
    NIGHT,
    OPPONENT,
    OPTIONAL_CHOICES,
    PARTNER,
    SECOND,
    State,
)

Command = pb.Command
#: with a `limit` and no `rng`, at most this many Teams per Job are listed, the first in `teams`
#: order (the representative sample bots choose among; decide accepts every matching Team)
TEAMS_PER_JOB_SAMPLE = 4


def pull_caper(card: str, use_defaults: bool = False) -> Command:
    c = Command()  # fields set in place: cheaper than building and copying a sub-message
    body = c.pull_caper
    body.card = card
    if use_defaults:
        body.use_defaults = True
    return c


def complete_job(job: str, team: Any) -> Command:
    c = Command()
    body = c.complete_job
    body.job = job
    body.team.extend(team)
    return c


def answer_command(choice: str, answer: Any) -> Command:
    """The command that gives `answer` to an open `choice` (None declines an optional one)."""
    if choice == OPPONENT:
        return Command(rob_opponent=pb.RobOpponent(opponent=answer))
    if choice == KEEP:
        return Command(keep_card=pb.KeepCard(card=answer))
    if choice == ABDUCT:
        return Command(abduct_specialist=pb.AbductSpecialist(opponent=answer[0], card=answer[2]))
    if choice == KIDNAP:
        return Command(kidnap_specialist=pb.KidnapSpecialist(opponent=answer[0], card=answer[2]))
    if choice == HIT:
        return Command(hit_specialist=pb.HitSpecialist(opponent=answer[0], card=answer[2]))
    if choice == JOB_SWAP:
        if answer is None:
            return Command(decline_job_swap=pb.DeclineJobSwap())
        return Command(swap_jobs=pb.SwapJobs(own_job=answer[0], opponent=answer[1], their_job=answer[2]))
    if choice == NIGHT:
        return Command(return_night=pb.ReturnNight(night=answer))
    if choice == PARTNER:
        return Command(choose_partner=pb.ChoosePartner(card=answer))
    if choice == COPY:
        return Command(copy_caper=pb.CopyCaper(card=answer))
    if choice == SECOND:
        if answer is None:
            return Command(decline_second_caper=pb.DeclineSecondCaper())
        return Command(pull_second_caper=pb.PullSecondCaper(card=answer))
    raise ValueError(choice)


def by_skill(hand: tuple[str, ...]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {BRAIN: [], SPEED: [], BRAWN: []}
    for card in hand:
        out[SKILL_OF[card]].append(card)
    return out


#: GR-J03: each Job's icons as (BRAIN, SPEED, BRAWN) counts, for a quick feasibility check
_NEEDS: dict[str, tuple[int, int, int]] = {
    j.id: (dict(j.skills).get(BRAIN, 0), dict(j.skills).get(SPEED, 0), dict(j.skills).get(BRAWN, 0))
    for j in JOBS_BY_ID.values()
}


def teams(hand: tuple[str, ...], job: str, skills: dict[str, list[str]] | None = None) -> Any:
    """Every Team in `hand` matching `job` exactly (GR-J03), in canonical order, lazily."""
    by_skill_ = by_skill(hand) if skills is None else skills
    parts = []
    for skill, n in JOBS_BY_ID[job].skills:
        if n == 0:
            continue
        cards = by_skill_.get(skill, [])
        if len(cards) < n:
            return iter(())
        parts.append(combinations(cards, n))
    if len(parts) == 1:
        return parts[0]
    return (tuple(chain.from_iterable(pick)) for pick in product(*parts))


# legal_commands lists the same few commands over and over (a card, a Job with a Team, an answer):
# it hands out shared, prebuilt instances of them. Treat listed commands as read-only (the engine
# contract): copy one (`Command().CopyFrom(c)`) before changing it.
_listed_pull_caper = cache(pull_caper)
_listed_complete_job = complete_job  # Teams vary too much to be worth caching
_listed_answer = lru_cache(maxsize=1 << 14)(answer_command)


def legal_commands(state: State, seat: int, limit: int | None = None, *,
                   rng: Draws | None = None) -> list[Command]:
    """Every legal command of `seat` now, at most `limit`. Compound choices (a Job's Team, the
    Forger's pair of Jobs) that do not fit are a `Sampled`: fixed members, or with `rng` members
    drawn from all of them (`sampler`); small choices are listed in full, as always."""
    if limit is not None and limit < 0:  # at most a negative number: none
        return []
    decision = open_decision(state)
    if not decision or seat != state.active:
        return []
    if decision == PLAY_DECISION:
        return _play_commands(state, seat, limit, rng)
    options: list[Any] = choice_options(state, decision)
    if decision in OPTIONAL_CHOICES:
        options = [None, *options]
    if limit is not None and len(options) > limit:
        if rng is None:
            del options[limit:]
        else:  # cut at random, so that any answer can come up; declining stays first while it fits
            keep = 1 if decision in OPTIONAL_CHOICES and limit > 1 else 0
            options = options[:keep] + draw_in_order(options[keep:], limit - keep, rng)
        if decision == JOB_SWAP:  # GR-K11: one own Job by one of theirs, a compound choice
            return Sampled(_listed_answer(decision, o) for o in options)
    return [_listed_answer(decision, o) for o in options]


def _play_commands(state: State, seat: int, limit: int | None, rng: Draws | None) -> list[Command]:
    """GR-D02: a caper with each card in hand (GR-C01), then the Teams of each available Job
    (GR-J01, GR-J03) in stack order: all of them without a `limit`, else the first
    TEAMS_PER_JOB_SAMPLE of each, cut at the limit (a `Sampled` when that leaves a Team out)."""
    hand = state.players[seat].hand
    skills = by_skill(hand)
    b, s, w = len(skills[BRAIN]), len(skills[SPEED]), len(skills[BRAWN])
    jobs: list[tuple[str, int]] = []  # (job, how many Teams) for each Job with a Team
    total = shown = 0  # how many Teams in all, and how many the fixed answer lists before the limit
    for _, stack in state.stacks:
        if not stack:
            continue
        job = stack[0]
        nb, ns, nw = _NEEDS[job]
        if b >= nb and s >= ns and w >= nw:
            n = team_count(b, s, w, job)
            jobs.append((job, n))
            total += n
            shown += n if n < TEAMS_PER_JOB_SAMPLE else TEAMS_PER_JOB_SAMPLE
    sampled = total > 0 and limit is not None and min(max(limit - len(hand), 0), shown) < total
    if sampled and rng is not None and limit is not None:
        return _drawn_play_commands(hand, skills, jobs, limit, rng)
    out = (Sampled if sampled else list)(map(_listed_pull_caper, hand))
    per_job = None if limit is None else TEAMS_PER_JOB_SAMPLE  # all of them when nothing is sampled
    for job, _ in jobs:
        out.extend(_listed_complete_job(job, team) for team in islice(teams(hand, job, skills), per_job))
    if limit is not None and len(out) > limit:
        if rng is None:
            del out[limit:]
        else:  # capers alone (no Team to sample), cut at random
            out = type(out)(draw_in_order(out, limit, rng))
    return out


def _drawn_play_commands(hand: tuple[str, ...], skills: dict[str, list[str]], jobs: list[tuple[str, int]],
                         limit: int, rng: Draws) -> Sampled:
    """GR-J03 drawn (`sampler.draw_teams`): the Teams get what the capers leave, but never fewer
    places than one Job's fixed sample (half the limit, below 8), so that a long hand (GR-R14)
    cannot crowd them out; the capers are then drawn among the hand."""
    total = sum(n for _, n in jobs)
    budget = min(total, limit, max(limit - len(hand), min(TEAMS_PER_JOB_SAMPLE, limit // 2), 1))
    out = Sampled(_listed_pull_caper(card) for card in draw_in_order(hand, limit - budget, rng))
    out.extend(_listed_complete_job(job, team) for job, team in draw_teams(skills, jobs, budget, rng))
    return out


_PENDING: dict[tuple[int, str, float], Pending] = {}


def pending(state: State) -> list[Pending]:
    """GR-D01: the active player while the play decision or a follow-up choice is open."""
    decision = open_decision(state)
    if not decision:
        return []
    key = (state.active, decision, timeout_seconds(state, decision))
    hit = _PENDING.get(key)
    if hit is None:
        if len(_PENDING) > 1024:
            _PENDING.clear()
        hit = _PENDING[key] = Pending(state.active, DecisionKind.TURN, decision, False, key[2])
    return [hit]


def timeout_command(state: State, seat: int) -> Command | None:
    """GR-D06: the first card in hand order as a caper, all its choices by default; GR-D03 defaults."""
    decision = open_decision(state)
    if not decision or seat != state.active:
        return None
    if decision == PLAY_DECISION:
        return pull_caper(state.players[seat].hand[0], use_defaults=True)
    options = choice_options(state, decision)
    return answer_command(decision, default_answer(state, decision, options))
