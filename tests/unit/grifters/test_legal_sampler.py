"""The sampler of `legal_commands` (DESIGN.md, "a complete generator/sampler that covers them all"):
with `rng`, a Job's Team (GR-J03, GR-D02) and the Forger's pair of Jobs (GR-K11) are drawn from
every legal member; without it the answer is the representative one, unchanged."""

from __future__ import annotations

import random
from itertools import islice
from typing import Any

import pytest

from famiglia.engine import Sampled
from famiglia.rules.grifters import ENGINE
from famiglia.rules.grifters import commands as C
from famiglia.rules.grifters.data import BRAIN, BRAWN, JOBS_BY_ID, SPECIALISTS, SPEED
from famiglia.rules.grifters.sampler import draw_teams, team_at, team_count
from famiglia.rules.grifters.state import JOB_SWAP, State, in_hand_order

from ._helpers import CON, FORGER, act, answer, caper, sp, table

# J-R1 wants 2 BRAIN 1 SPEED: 5 BRAIN cards and 3 SPEED ones make 10 x 3 = 30 Teams
BRAINS = ["R0-MM", sp(2, 1), sp(2, 2), sp(3, 1), sp(3, 2)]
SPEEDS = ["R0-TH", sp(6, 1), sp(6, 2)]
R1_ONLY = [("Red", ["J-R1"]), ("Blue", []), ("Green", [])]


def key(command: Any) -> bytes:
    return bytes(command.SerializeToString(deterministic=True))


def teams_of(commands: list[Any], job: str) -> list[tuple[str, ...]]:
    return [tuple(c.complete_job.team) for c in commands
            if c.WhichOneof("kind") == "complete_job" and c.complete_job.job == job]


def r1_table(*extra: str) -> State:
    return table(2, hands={0: [*BRAINS, *SPEEDS, *extra]}, stacks=R1_ONLY)


def test_gr_j03_the_sampler_draws_a_team_the_fixed_sample_never_lists_and_decide_takes_it() -> None:
    """GR-J03, GR-D02: J-R1's first four Teams are all bots ever see; the sampler draws the others,
    and decide completes the Job with them."""
    s = r1_table()
    fixed = set(teams_of(ENGINE.legal_commands(s, 0, 64), "J-R1"))
    assert len(fixed) == C.TEAMS_PER_JOB_SAMPLE
    draws = random.Random(7)
    drawn = [t for _ in range(20) for t in teams_of(ENGINE.legal_commands(s, 0, 16, rng=draws), "J-R1")]
    new = [t for t in drawn if t not in fixed]
    assert new
    after, events = act(s, C.complete_job("J-R1", new[0]))
    assert "job_completed" in [e.WhichOneof("kind") for e in events]
    assert "J-R1" in after.players[0].jobs and set(new[0]).isdisjoint(after.players[0].hand)


def test_gr_j03_every_matching_team_comes_up() -> None:
    """GR-J03: over draws, each of the 30 Teams of J-R1 is listed (a complete sampler)."""
    s = r1_table()
    every = {key(c) for c in ENGINE.legal_commands(s, 0) if c.WhichOneof("kind") == "complete_job"}
    assert len(every) == 30
    seen: set[bytes] = set()
    draws = random.Random(3)
    for _ in range(200):
        seen.update(key(c) for c in ENGINE.legal_commands(s, 0, 16, rng=draws))
    assert every <= seen


def test_gr_d02_without_rng_the_answer_is_the_representative_one() -> None:
    """GR-D02: no rng, no change: every card's caper in hand order, then the first Teams of each
    available Job in stack order, cut at the limit; a `Sampled` only when a Team is left out."""
    s = table(2, hands={0: [*BRAINS, *SPEEDS, sp(11, 1), sp(12, 1), "R0-PP"]})
    hand = s.players[0].hand
    expected = [C.pull_caper(c) for c in hand]
    for job in s.available_jobs():
        expected += [C.complete_job(job, t) for t in islice(C.teams(hand, job), C.TEAMS_PER_JOB_SAMPLE)]
    for limit in (4, 16, 64):
        listed = ENGINE.legal_commands(s, 0, limit)
        assert [key(c) for c in listed] == [key(c) for c in expected[:limit]]
        assert isinstance(listed, Sampled)
    every = ENGINE.legal_commands(s, 0)
    assert type(every) is list and len(teams_of(every, "J-R1")) == 30
    # no limit: every Team is listed, nothing to draw
    assert [key(c) for c in ENGINE.legal_commands(s, 0, rng=random.Random(1))] == [key(c) for c in every]
    # few Teams, all listed: a complete answer, no sample
    small = table(2, hands={0: ["R0-MM", sp(2, 1), "R0-TH"]}, stacks=R1_ONLY)
    assert type(ENGINE.legal_commands(small, 0, 16)) is list
    assert type(ENGINE.legal_commands(small, 0, 16, rng=random.Random(1))) is list


@pytest.mark.parametrize("limit", [0, 1, 2, 5, 8, 9, 16, 64])
def test_gr_d02_the_sampler_respects_the_limit_and_lists_only_legal_commands(limit: int) -> None:
    """GR-D02, GR-J03: at most `limit` commands, distinct, each accepted by decide; a `Sampled`
    with rng exactly when it is one without."""
    s = r1_table()
    draws = random.Random(limit)
    fixed = ENGINE.legal_commands(s, 0, limit)
    for _ in range(10):
        listed = ENGINE.legal_commands(s, 0, limit, rng=draws)
        assert len(listed) <= limit and len({key(c) for c in listed}) == len(listed)
        assert isinstance(listed, Sampled) == isinstance(fixed, Sampled)
        for command in listed:
            act(s, command)
    if limit - len(BRAINS) - len(SPEEDS) >= C.TEAMS_PER_JOB_SAMPLE:  # room for Teams: capers as always
        listed = ENGINE.legal_commands(s, 0, limit, rng=draws)
        assert [c.pull_caper.card for c in listed if c.WhichOneof("kind") == "pull_caper"] == list(s.players[0].hand)


def test_gr_r14_a_hand_that_fills_the_limit_still_leaves_teams_a_chance() -> None:
    """GR-R14 (no hand limit), GR-J03: when the capers alone fill the limit the fixed answer shows
    no Team at all; the sampler keeps as many places for Teams as one Job's fixed sample and draws
    the capers among the hand."""
    s = r1_table(sp(11, 1), sp(12, 1), sp(13, 1), sp(14, 1), sp(15, 1), sp(16, 1), "R0-PP", sp(11, 2))
    hand = s.players[0].hand
    assert len(hand) == 16
    fixed = ENGINE.legal_commands(s, 0, 16)
    assert isinstance(fixed, Sampled) and not teams_of(fixed, "J-R1")
    draws = random.Random(5)
    cards: set[str] = set()
    for _ in range(50):
        listed = ENGINE.legal_commands(s, 0, 16, rng=draws)
        assert len(listed) == 16 and len(teams_of(listed, "J-R1")) == C.TEAMS_PER_JOB_SAMPLE
        capers = [c.pull_caper.card for c in listed if c.WhichOneof("kind") == "pull_caper"]
        assert tuple(capers) == in_hand_order(capers)  # drawn, kept in hand order
        cards.update(capers)
    assert cards == set(hand)


def test_gr_j01_each_available_job_gets_a_team_while_the_budget_lasts() -> None:
    """GR-J01, GR-J03: the draw serves every Job with a Team before drawing more at random."""
    s = table(2, hands={0: [*BRAINS, *SPEEDS, sp(11, 1), sp(12, 1), "R0-PP"]})
    hand = s.players[0].hand
    jobs = [j for j in s.available_jobs() if next(iter(C.teams(hand, j)), None)]
    assert len(jobs) == 3
    listed = ENGINE.legal_commands(s, 0, 6, rng=random.Random(2))  # room for three Teams
    assert [c.complete_job.job for c in listed if c.WhichOneof("kind") == "complete_job"] == jobs


def test_gr_j03_teams_are_indexed_in_listing_order() -> None:
    """GR-J03: `team_at` is the i-th Team of `teams` and `team_count` their number, so a draw by
    index is a draw of a Team, any hand, any Job."""
    rng = random.Random(11)
    cards = [c.id for c in SPECIALISTS] + ["R0-MM", "R0-TH", "R0-PP"]
    for _ in range(40):
        hand = in_hand_order(rng.sample(cards, rng.randrange(3, 12)))
        skills = C.by_skill(hand)
        counts = (len(skills[BRAIN]), len(skills[SPEED]), len(skills[BRAWN]))
        for job in JOBS_BY_ID:
            every = list(C.teams(hand, job, skills))
            assert team_count(*counts, job) == len(every)
            assert [team_at(skills, job, i) for i in range(len(every))] == every
            if every:
                drawn = draw_teams(skills, [(job, len(every))], 3, rng)
                assert len(drawn) == min(3, len(every)) and all(t in every for _, t in drawn)


def forger_table() -> State:
    """Seat 0 holds five Jobs and each opponent five: 5 x 15 = 75 swaps, and declining."""
    jobs = [j for j in JOBS_BY_ID]
    s = table(4, hands={0: [FORGER, CON]}, jobs={seat: jobs[5 * seat:5 * seat + 5] for seat in range(4)})
    s, _ = act(s, caper(FORGER))
    assert s.choice == JOB_SWAP
    return s


def test_gr_k11_the_forgers_swaps_are_drawn_when_they_do_not_fit() -> None:
    """GR-K11, GR-D04: the pairs of Jobs beyond the limit are a sample: without rng the first ones,
    declining first; with rng declining stays first and every swap comes up, each accepted."""
    s = forger_table()
    every = ENGINE.legal_commands(s, 0)
    assert type(every) is list and len(every) == 1 + 75
    fixed = ENGINE.legal_commands(s, 0, 16)
    assert isinstance(fixed, Sampled) and [key(c) for c in fixed] == [key(c) for c in every[:16]]
    assert type(ENGINE.legal_commands(s, 0, 76, rng=random.Random(1))) is list  # all fit: complete
    draws = random.Random(9)
    seen: set[bytes] = set()
    for _ in range(100):
        listed = ENGINE.legal_commands(s, 0, 16, rng=draws)
        assert isinstance(listed, Sampled) and len(listed) == 16
        assert listed[0].WhichOneof("kind") == "decline_job_swap"
        seen.update(key(c) for c in listed)
    assert {key(c) for c in every} <= seen
    swap = ENGINE.legal_commands(s, 0, 2, rng=random.Random(4))[1].swap_jobs
    after, _ = act(s, answer(JOB_SWAP, (swap.own_job, swap.opponent, swap.their_job)))
    assert swap.their_job in after.players[0].jobs and swap.own_job in after.players[swap.opponent].jobs


def test_the_same_draws_give_the_same_sample() -> None:
    """A seeded generator draws the same members again (ListLegalCommands' sample_seed)."""
    s = r1_table()
    a = ENGINE.legal_commands(s, 0, 12, rng=random.Random(42))
    b = ENGINE.legal_commands(s, 0, 12, rng=random.Random(42))
    assert [key(c) for c in a] == [key(c) for c in b]


def test_gr_d02_a_small_choice_or_the_capers_cut_at_a_limit_are_cut_at_random_with_rng() -> None:
    """A follow-up choice, or a hand of capers with no Team, longer than the limit: without rng
    its first answers (unchanged); with rng any of them can come up, declining first if optional."""
    from famiglia.testing.random_play import play_random

    found: dict[str, tuple[State, int]] = {}

    def spot(before: State, step: Any, after: State) -> None:
        decision = C.open_decision(before)
        if not decision or decision in found:
            return
        full = ENGINE.legal_commands(before, before.active)
        if len(full) > 3 and not isinstance(ENGINE.legal_commands(before, before.active, 2), Sampled):
            found[decision] = (before, before.active)

    for seed in range(40):
        play_random(ENGINE, 4, seed, on_step=spot)
    assert found, "no choice longer than the limit in 40 games"
    for state, seat in found.values():
        full = [key(c) for c in ENGINE.legal_commands(state, seat)]
        assert [key(c) for c in ENGINE.legal_commands(state, seat, 2)] == full[:2]
        seen: set[bytes] = set()
        draws = random.Random(9)
        for _ in range(300):
            listed = ENGINE.legal_commands(state, seat, 2, rng=draws)
            assert len(listed) <= 2 and not isinstance(listed, Sampled)
            seen.update(key(c) for c in listed)
        assert seen == set(full)
