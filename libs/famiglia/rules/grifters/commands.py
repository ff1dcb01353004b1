"""Command constructors, `legal_commands`, `pending` and `timeout_command` over the decision table."""

from __future__ import annotations

from functools import cache, lru_cache
from itertools import chain, combinations, islice, product
from typing import Any

from famiglia.engine import DecisionKind, Pending
from famiglia.grifters.v1 import grifters_pb2 as pb

from .data import BRAIN, BRAWN, JOBS_BY_ID, SKILL_OF, SPEED
from .flow import PLAY_DECISION, choice_options, default_answer, open_decision, timeout_seconds
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
#: with a `limit`, at most this many Teams per Job are listed (a representative sample; decide
#: accepts every matching Team)
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


def legal_commands(state: State, seat: int, limit: int | None = None) -> list[Command]:
    decision = open_decision(state)
    if not decision or seat != state.active:
        return []
    if decision == PLAY_DECISION:
        hand = state.players[seat].hand
        out = [_listed_pull_caper(card) for card in hand]
        per_job = None if limit is None else TEAMS_PER_JOB_SAMPLE
        skills = by_skill(hand)
        b, s, w = len(skills[BRAIN]), len(skills[SPEED]), len(skills[BRAWN])
        for _, jobs in state.stacks:
            if not jobs:
                continue
            job = jobs[0]
            nb, ns, nw = _NEEDS[job]
            if b >= nb and s >= ns and w >= nw:
                out.extend(_listed_complete_job(job, team) for team in islice(teams(hand, job, skills), per_job))
    else:
        options: list[Any] = choice_options(state, decision)
        if decision in OPTIONAL_CHOICES:
            options = [None, *options]
        out = [_listed_answer(decision, o) for o in options]
    if limit is not None and len(out) > limit:
        del out[limit:]
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
