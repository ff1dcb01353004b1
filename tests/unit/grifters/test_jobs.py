"""Jobs (GR-J01..GR-J11)."""

from __future__ import annotations

import pytest

from famiglia.engine import RuleViolation
from famiglia.rules.grifters import ENGINE
from famiglia.rules.grifters.data import COLOURS, JOBS, JOBS_BY_ID
from famiglia.rules.grifters.state import OPPONENT

from ._helpers import (
    CON,
    ENFORCER,
    FALL,
    MIDDLE,
    THUG,
    WHEEL,
    act,
    answer,
    caper,
    job,
    kinds,
    of_kind,
    sp,
    table,
)

# J-R1: 2 BRAIN 1 SPEED, 3 from the Coffers
R1_TEAM = ("R0-MM", sp(2, 1), "R0-TH")


def test_gr_j01_only_the_top_job_of_a_stack_is_available() -> None:
    """GR-J01: only the top job of a stack is available."""
    s = table(2, hands={0: ["R0-MM", sp(2, 1), sp(3, 1), "R0-TH", sp(6, 1)]})
    with pytest.raises(RuleViolation) as exc:
        act(s, job("J-R2", "R0-MM", "R0-TH", sp(6, 1), "R0-PP"))
    assert exc.value.code == "GR-J01"
    assert set(s.available_jobs()) == {"J-R1", "J-B1", "J-G1"}


def test_gr_j02_twenty_jobs_five_colours_team_sizes_three_to_six() -> None:
    """GR-J02: twenty jobs five colours team sizes three to six."""
    assert len(JOBS) == 20
    for colour in COLOURS:
        stack = sorted((j for j in JOBS if j.colour == colour), key=lambda j: j.order)
        assert [sum(n for _, n in j.skills) for j in stack] == [3, 4, 5, 6]
        assert len({j.mark for j in stack}) == 1
    assert sorted(j.mark for j in JOBS if j.order == 1) == [2, 2, 2, 3, 4]
    assert JOBS_BY_ID["J-G1"].name == "Hack Credit System"


def test_gr_j03_the_team_must_match_the_skills_exactly() -> None:
    """GR-J03: the team must match the skills exactly."""
    hand = ["R0-MM", sp(2, 1), sp(3, 1), "R0-TH", sp(6, 1)]
    s = table(2, hands={0: hand})
    for team in [("R0-MM", sp(2, 1)), ("R0-MM", sp(2, 1), "R0-TH", sp(6, 1)), ("R0-MM", "R0-TH", sp(6, 1))]:
        with pytest.raises(RuleViolation) as exc:
            act(s, job("J-R1", *team))
        assert exc.value.code == "GR-J03"
    s, events = act(s, job("J-R1", *R1_TEAM[:2], sp(6, 1)))
    assert "job_completed" in kinds(events)


def test_gr_j04_a_ringleader_counts_as_one_card_of_its_skill() -> None:
    """GR-J04: a ringleader counts as one card of its skill."""
    s = table(2, hands={0: ["R0-MM", sp(2, 1), "R0-TH", CON]}, coffers=30)
    s, events = act(s, job("J-R1", *R1_TEAM))
    assert list(of_kind(events, "job_completed")[0].team) == ["R0-MM", "R0-TH", sp(2, 1)]


def test_gr_j05_the_texts_of_the_team_are_ignored() -> None:
    """GR-J05: the texts of the team are ignored."""
    s = table(2, hands={0: ["R0-MM", sp(2, 1), "R0-TH", CON]}, coffers=30)
    s, events = act(s, job("J-R1", *R1_TEAM))
    assert kinds(events).count("card_drawn") == 0 and "choice_opened" not in kinds(events)
    assert [e.amount for e in of_kind(events, "isk_stolen")] == [3]


def test_gr_j06_team_first_then_job_card_then_reward() -> None:
    """GR-J06: team first then job card then reward."""
    s = table(2, hands={0: ["R0-MM", sp(2, 1), "R0-TH", CON]}, coffers=30)
    s, events = act(s, job("J-R1", *R1_TEAM))
    k = kinds(events)
    assert k.index("job_completed") < k.index("isk_stolen") < k.index("caper_completed")
    assert s.players[0].nights[0] == ("R0-MM", "R0-TH", sp(2, 1))
    assert s.players[0].jobs == ("J-R1",) and dict(s.stacks)["Red"][0] == "J-R2"


def test_gr_j06_a_job_ending_the_game_during_its_reward_still_counts() -> None:
    """GR-J06: a job ending the game during its reward still counts."""
    s = table(2, hands={0: ["R0-MM", sp(2, 1), "R0-TH", CON]}, coffers=2)
    s, _ = act(s, job("J-R1", *R1_TEAM))
    assert s.over and s.players[0].jobs == ("J-R1",) and s.players[0].stash == 5


def test_gr_j06_option_reward_before_card_moves() -> None:
    """GR-J06: option reward before card moves."""
    s = table(2, hands={0: ["R0-MM", sp(2, 1), "R0-TH", CON]}, coffers=2,
              options={"job_card_moves_before_reward": "false"})
    s, _ = act(s, job("J-R1", *R1_TEAM))
    assert s.over and s.players[0].jobs == ()


def test_gr_j07_reward_from_one_opponent_asks_for_the_opponent() -> None:
    """GR-J07: reward from one opponent asks for the opponent."""
    # J-G1: 2 SPEED 1 BRAWN, 2 from one opponent
    s = table(3, hands={0: ["R0-TH", sp(6, 1), "R0-PP", MIDDLE]}, stash={1: 1, 2: 4})
    s, events = act(s, job("J-G1", "R0-TH", sp(6, 1), "R0-PP"))
    assert s.choice == OPPONENT
    s, events = act(s, answer(OPPONENT, 2))
    assert [(e.victim, e.amount) for e in of_kind(events, "isk_stolen")] == [(2, 2)]


def test_gr_j07_reward_draw() -> None:
    """GR-J07: reward draw."""
    # J-B1: 1 BRAIN 2 BRAWN, draw 2
    s = table(2, hands={0: ["R0-MM", "R0-PP", THUG, CON]})
    s, events = act(s, job("J-B1", "R0-MM", "R0-PP", THUG))
    assert len(of_kind(events, "card_drawn")) == 2


def test_gr_j08_reward_from_each_opponent_in_seat_order_from_the_left() -> None:
    """GR-J08: reward from each opponent in seat order from the left."""
    # J-G3: 3 BRAIN 2 SPEED, 2 from each opponent
    stacks = [("Green", ["J-G3", "J-G4"]), ("Red", ["J-R1"])]
    s = table(4, hands={0: ["R0-MM", sp(2, 1), sp(3, 1), "R0-TH", sp(6, 1), CON]}, stacks=stacks, active=0,
              stash={1: 1, 2: 0, 3: 5})
    s, events = act(s, job("J-G3", "R0-MM", sp(2, 1), sp(3, 1), "R0-TH", sp(6, 1)))
    assert [(e.victim, e.amount) for e in of_kind(events, "isk_stolen")] == [(1, 1), (3, 2)]


def test_gr_j09_the_one_opponent_may_have_an_empty_stash() -> None:
    """GR-J09: the one opponent may have an empty stash."""
    s = table(3, hands={0: ["R0-TH", sp(6, 1), "R0-PP", MIDDLE]}, stash={1: 0, 2: 4})
    s, _ = act(s, job("J-G1", "R0-TH", sp(6, 1), "R0-PP"))
    s, events = act(s, answer(OPPONENT, 1))
    assert "isk_stolen" not in kinds(events) and s.players[0].jobs == ("J-G1",)


def test_gr_j10_completed_jobs_stay_in_the_job_area() -> None:
    """GR-J10: completed jobs stay in the job area."""
    s = table(2, hands={0: ["R0-MM", sp(2, 1), "R0-TH", CON], 1: [ENFORCER]}, coffers=30)
    s, _ = act(s, job("J-R1", *R1_TEAM))
    s, _ = act(s, caper(ENFORCER))
    assert s.players[0].jobs == ("J-R1",)


def test_gr_j11_the_team_must_be_in_hand_and_a_job_is_the_whole_phase_two() -> None:
    """GR-J11: the team must be in hand and a job is the whole phase two."""
    s = table(2, hands={0: ["R0-MM", sp(2, 1), CON]}, refresh={0: ["R0-TH"]})
    with pytest.raises(RuleViolation) as exc:
        act(s, job("J-R1", *R1_TEAM))
    assert exc.value.code == "GR-J11"
    with pytest.raises(RuleViolation) as exc:
        act(s, job("J-R1", "R0-MM", "R0-MM", CON))
    assert exc.value.code == "GR-J11"
    s = table(2, hands={0: ["R0-MM", sp(2, 1), "R0-TH", CON, FALL, WHEEL]}, coffers=30)
    s, _ = act(s, job("J-R1", *R1_TEAM))
    assert s.active == 1


def test_gr_j03_legal_commands_list_every_matching_team() -> None:
    """GR-J03: legal commands list every matching team."""
    s = table(2, hands={0: ["R0-MM", sp(2, 1), sp(3, 1), "R0-TH", sp(6, 1)]})
    jobs = [c.complete_job for c in ENGINE.legal_commands(s, 0) if c.WhichOneof("kind") == "complete_job"]
    r1 = [tuple(j.team) for j in jobs if j.job == "J-R1"]
    assert len(r1) == 3 * 2  # 3 BRAIN pairs x 2 SPEED cards
    for team in r1:
        act(s, job("J-R1", *team))


def test_gr_j03_j07_the_seeds_worked_example_hack_credit_system() -> None:
    """GR-J03, GR-J07, the seed's own example: Dave completes Hack Credit System (2 SPEED,
    1 BRAWN) with the Con Artist ("Estafador", SPEED), the Thief (SPEED) and the Middle Man
    (BRAWN) as one Team on Night One, and as reward steals 2M from Jake's Stash."""
    dave, jake = 0, 1
    s = table(2, hands={dave: [CON, "R0-TH", MIDDLE, "R0-MM"]}, stash={dave: 3, jake: 5},
              stacks=[("Green", ["J-G1", "J-G2"])])
    s, _ = act(s, job("J-G1", CON, "R0-TH", MIDDLE))
    if s.choice == OPPONENT:  # two seats: the one opponent may be chosen for us (GR-D04)
        s, _ = act(s, answer(OPPONENT, jake))
    assert s.players[dave].nights[0] == ("R0-TH", CON, MIDDLE)
    assert s.players[dave].jobs == ("J-G1",) and s.available_jobs() == ("J-G2",)
    assert (s.players[dave].stash, s.players[jake].stash) == (5, 3)
